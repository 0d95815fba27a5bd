import asyncio

from tqdm.auto import tqdm

from lexrl.policy import ScriptedPolicy
from lexrl.rollout import engine
from lexrl.types import Task


class _ThreePlies:
    """Episodes of three scripted turns, the last recorded as an external judge's reply."""

    async def run_episode(self, task, policy):
        for ply in range(2):
            await policy.chat(f"agent{ply}", "system", f"ply {ply} of {task.id}")
            await asyncio.sleep(0)
        policy.record("judge", "system", "verdict?", "yes")
        return policy.finish(outcome=None, components={"reward": 1.0})


class _RecordingBar(tqdm):
    seen: list[tuple[int, str]] = []

    def set_postfix_str(self, s="", refresh=True):
        _RecordingBar.seen.append((self.n, s))
        super().set_postfix_str(s, refresh)


def test_the_bar_shows_turns_played_before_any_episode_ends(monkeypatch):
    monkeypatch.setattr(engine, "tqdm", _RecordingBar)
    _RecordingBar.seen = []
    tasks = [Task(id=str(i), inputs={}, gold=None) for i in range(2)]
    groups = engine.run_groups(
        _ThreePlies(),
        tasks,
        2,
        lambda task: ScriptedPolicy(None, task.id, lambda role, messages: "ok"),
        progress=True,
    )
    assert [len(t.turns) for g in groups for t in g.trajectories] == [3, 3, 3, 3]
    assert [postfix for _, postfix in _RecordingBar.seen] == [f"turns={n}" for n in range(1, 13)]
    # The four episodes run concurrently, so their first turns all come before any ends.
    assert [ended for ended, _ in _RecordingBar.seen[:4]] == [0, 0, 0, 0]
