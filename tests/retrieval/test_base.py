from lexrl.retrieval.base import CachedRetriever, Hit


class CountingRetriever:
    def __init__(self):
        self.calls = []

    def search(self, query, k):
        self.calls.append((query, k))
        return [Hit(i, float(-i)) for i in range(k)]


def test_cache_answers_a_repeated_query_without_asking_the_retriever():
    inner = CountingRetriever()
    cached = CachedRetriever(inner, max_size=2)
    first = cached.search("deposit", 3)
    assert cached.search("deposit", 3) == first == [Hit(0, 0.0), Hit(1, -1.0), Hit(2, -2.0)]
    assert inner.calls == [("deposit", 3)]
    cached.search("deposit", 5)
    cached.search("wages", 3)
    cached.search("deposit", 3)
    assert inner.calls == [("deposit", 3), ("deposit", 5), ("wages", 3), ("deposit", 3)]
    info = cached.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 4, 2)


def test_cached_results_are_copies():
    cached = CachedRetriever(CountingRetriever(), max_size=8)
    cached.search("q", 2).clear()
    assert len(cached.search("q", 2)) == 2
