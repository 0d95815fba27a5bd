"""A small synthetic statute world for the CPU demo and the tests, written by this project.

Six acts; each legal *concept* has one article written in legal terms and several colloquial
phrasings that share no content word with any article, so BM25 on the raw question finds little
and a rewrite into legal terms finds the article. Three question types make the choice of rewrite
agent matter:

- `single`: one concept; gold = its article.
- `multi`: two concepts from different acts; gold = both articles (a decomposing rewrite finds
  both, a single rewrite one).
- `procedural`: one concept plus a question about deadlines or where to complain; gold = the
  concept's article and its act's procedure article (needs the supportive-law agent).

Questions are built from templates and phrasings; a seeded 20% of them is held out as the test
split, so a test question is a combination of wording the policy has not seen as a whole.
Everything is generated from a seed: `build_demo_world(seed)` always returns the same world.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

# act -> the word its articles and its procedure article use for the domain
ACTS: dict[str, str] = {
    "Tenancy Act": "tenancy",
    "Employment Act": "employment",
    "Consumer Act": "consumer",
    "Traffic Act": "traffic",
    "Family Act": "family",
    "Data Protection Act": "data",
}

# (act, legal terms used in the article and by a good rewrite, colloquial phrasings)
CONCEPTS: list[tuple[str, str, list[str]]] = [
    (
        "Tenancy Act",
        "security deposit refund lessor",
        [
            "the landlord keeps the cash I paid when moving in",
            "my flat owner will not hand back my move-in money",
        ],
    ),
    (
        "Tenancy Act",
        "rent increase notice lessee",
        ["my landlord wants way more every month", "the flat owner suddenly asks me to pay double"],
    ),
    (
        "Tenancy Act",
        "lease termination eviction",
        ["they are kicking me out of my apartment", "the owner told me to pack my bags and go"],
    ),
    (
        "Tenancy Act",
        "dwelling defects repair obligation",
        ["the heating is broken and nobody fixes it", "water drips from my ceiling for weeks"],
    ),
    (
        "Tenancy Act",
        "sublease consent",
        [
            "can I let a friend stay in my room and pay me",
            "I want someone else to live in my place for a while",
        ],
    ),
    (
        "Employment Act",
        "remuneration arrears employer",
        ["my boss has not paid me for two months", "the company owes me salary since spring"],
    ),
    (
        "Employment Act",
        "dismissal notice period",
        ["I got fired out of nowhere", "they let me go without any warning"],
    ),
    (
        "Employment Act",
        "overtime compensation working hours",
        [
            "they make me stay late every night for free",
            "I work twelve hours a day with no extra money",
        ],
    ),
    (
        "Employment Act",
        "occupational injury benefits",
        ["I hurt my back on the job", "a machine at the factory crushed my hand"],
    ),
    (
        "Employment Act",
        "annual leave entitlement",
        ["my boss never lets me take holidays", "I have not had a day off all year"],
    ),
    (
        "Consumer Act",
        "defective goods warranty replacement",
        ["the phone I bought stopped working after a week", "my new washer broke on day two"],
    ),
    (
        "Consumer Act",
        "distance contract withdrawal",
        [
            "I want to send back stuff I ordered online",
            "I regret an internet purchase and want my money back",
        ],
    ),
    (
        "Consumer Act",
        "misleading advertisement trader liability",
        [
            "the ad lied about what the product does",
            "the shop promised things the blender cannot do",
        ],
    ),
    (
        "Consumer Act",
        "undisclosed charges price transparency",
        ["extra costs popped up at checkout", "the bill had fees nobody told me about"],
    ),
    (
        "Traffic Act",
        "collision damages motor vehicle",
        ["someone crashed into my car", "a van smashed my bumper at the lights"],
    ),
    (
        "Traffic Act",
        "driving under influence alcohol",
        [
            "I was caught behind the wheel after a few beers",
            "police stopped me after drinks at a party",
        ],
    ),
    (
        "Traffic Act",
        "leaving accident scene",
        [
            "the driver who hit me just drove off",
            "a cyclist was knocked down and the car sped away",
        ],
    ),
    (
        "Traffic Act",
        "licence suspension penalty points",
        ["they took away my permit to drive", "I might lose my right to drive for speeding"],
    ),
    (
        "Family Act",
        "dissolution marriage",
        ["my wife and I want to split up", "my husband and I are done and want to separate"],
    ),
    (
        "Family Act",
        "custody minor parental",
        ["who gets the kids after we break up", "my ex wants our daughter to live with him"],
    ),
    (
        "Family Act",
        "child maintenance payments",
        ["my ex will not pay anything for our son", "the father gives no money for the baby"],
    ),
    (
        "Family Act",
        "succession estate heirs",
        [
            "grandpa died and who gets his house",
            "my aunt passed away and the family fights over her things",
        ],
    ),
    (
        "Data Protection Act",
        "erasure personal data controller",
        [
            "I want a company to forget everything about me",
            "a website still has my old profile and I want it gone",
        ],
    ),
    (
        "Data Protection Act",
        "breach notification",
        ["my info got leaked by a website", "hackers stole my details from an online shop"],
    ),
    (
        "Data Protection Act",
        "video surveillance consent",
        [
            "my neighbour points a camera at my garden",
            "my boss filmed me at my desk without telling me",
        ],
    ),
]

PROCEDURE_TERMS = "limitation period complaint authority"
PROCEDURE_ASIDES = [
    "how long do I have to do something about it",
    "where can I go to complain about this",
    "is it too late to take action",
]

SINGLE_TEMPLATES = [
    "Help, {a}. What can I do?",
    "{a}, is that allowed?",
    "Question: {a}.",
    "Hi, {a}. Any rights here?",
    "So {a}. What now?",
]
MULTI_TEMPLATES = [
    "Help, {a}, and also {b}. What can I do?",
    "{a}; on top of that {b}.",
    "Two problems: {a}, plus {b}. Any rights here?",
]
PROCEDURAL_TEMPLATES = ["Help, {a}. Also {p}?", "{a}, so {p}?", "Hi, {a}. Tell me {p}."]
MULTI_PAIRS = 150
TEST_FRACTION = 0.2

# Articles that share the acts' vocabulary but answer no question: they make retrieval non-trivial.
FILLER_TERMS = [
    "definitions scope application",
    "transitional provisions entry into force",
    "competent ministry regulations",
]


@dataclass
class DemoWorld:
    corpus: list[dict] = field(default_factory=list)
    """Articles: {"id", "name", "content"} like STARD's corpus.jsonl."""
    train: list[dict] = field(default_factory=list)
    test: list[dict] = field(default_factory=list)
    """Questions: {"id", "query", "gold": [article ids], "type", "plan"}; `plan` is what the
    scripted teacher knows (concept terms, act) and never enters a prompt."""


def _article_text(act: str, terms: str, number: int) -> str:
    return (
        f"{act} Article {number}. Where a matter of {terms} arises, the party concerned holds the "
        f"rights on {terms} set out in this article, and the {ACTS[act]} authority applies it."
    )


def build_demo_world(seed: int = 0) -> DemoWorld:
    rng = random.Random(seed)
    world = DemoWorld()
    concept_article: list[int] = []
    procedure_article: dict[str, int] = {}
    number_in_act = dict.fromkeys(ACTS, 1)

    def add_article(act: str, terms: str) -> int:
        article_id = len(world.corpus)
        number = number_in_act[act]
        number_in_act[act] += 1
        world.corpus.append(
            {
                "id": article_id,
                "name": f"{act} Article {number}",
                "content": _article_text(act, terms, number),
            }
        )
        return article_id

    for act in ACTS:
        procedure_article[act] = add_article(act, f"{PROCEDURE_TERMS} {ACTS[act]}")
        for filler in FILLER_TERMS:
            add_article(act, f"{filler} {ACTS[act]}")
    for act, terms, _ in CONCEPTS:
        concept_article.append(add_article(act, terms))

    def plan(concept_indices: list[int], procedural: bool) -> dict:
        return {
            "concepts": [CONCEPTS[i][1] for i in concept_indices],
            "acts": [CONCEPTS[i][0] for i in concept_indices],
            "procedural": procedural,
        }

    questions: list[dict] = []
    for index, (act, _, phrasings) in enumerate(CONCEPTS):
        for phrase in phrasings:
            for template in SINGLE_TEMPLATES:
                questions.append(
                    {
                        "query": template.format(a=phrase),
                        "gold": [concept_article[index]],
                        "type": "single",
                        "plan": plan([index], False),
                    }
                )
            for template in PROCEDURAL_TEMPLATES:
                questions.append(
                    {
                        "query": template.format(a=phrase, p=rng.choice(PROCEDURE_ASIDES)),
                        "gold": [concept_article[index], procedure_article[act]],
                        "type": "procedural",
                        "plan": plan([index], True),
                    }
                )
    pairs = [
        (i, j)
        for i in range(len(CONCEPTS))
        for j in range(len(CONCEPTS))
        if CONCEPTS[i][0] != CONCEPTS[j][0]
    ]
    for i, j in rng.sample(pairs, MULTI_PAIRS):
        questions.append(
            {
                "query": rng.choice(MULTI_TEMPLATES).format(
                    a=rng.choice(CONCEPTS[i][2]), b=rng.choice(CONCEPTS[j][2])
                ),
                "gold": [concept_article[i], concept_article[j]],
                "type": "multi",
                "plan": plan([i, j], False),
            }
        )
    rng.shuffle(questions)
    cut = int(len(questions) * (1 - TEST_FRACTION))
    for split, items in (("train", questions[:cut]), ("test", questions[cut:])):
        for number, item in enumerate(items):
            item["id"] = f"demo-{split}-{number}"
        setattr(world, split, items)
    return world
