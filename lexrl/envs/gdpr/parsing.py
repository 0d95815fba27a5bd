"""The Meta-LLM's answer to a MASLegalBench question, read from its reply.

The prompt asks for one JSON object `{"rationale": str, "answer": "A|B|C|D|Yes|No"}` (Jing et al.
2025, "MASLegalBench", arXiv:2509.24922, App. C). `parse_reply` reads, in this order:

1. the reply without its thinking: everything up to the last `</think>` is dropped, and so is
   everything from an unclosed `<think>` on (a reply cut off while thinking has no answer);
2. the LAST JSON object in the rest that has an `answer` key (any case), wherever it stands: bare,
   inside a ```json fence or with text around it (a fence needs no special case: the object
   inside it is found like any other);
3. failing that, a broken JSON-like object's `"answer": "..."` field (an unescaped quote in the
   rationale breaks the object but not the answer);
4. failing that, a stated answer in prose: the last "answer: B", "The answer is (B)", "Final
   answer: Yes". On an A-D question only an upper-case letter counts ("the answer is a breach"
   names no option);
5. failing that, a reply that is nothing but one label: "Yes.", "**No**", "(B)". Small models
   often answer so; a reply naming two labels ("Yes. No") or listing the options gives none.

Where 3, 4 or 5 gave the answer, the rationale is the whole reply without its thinking. The answer
value is normalised by `normalise_answer`; a value that names no option of the question's kind (a
refusal such as "insufficient context", "E" on an A-D question) gives answer None and an `error`
that says why, and so does a reply with no answer at all. Scoring None as wrong, or dropping it
from the denominator, is the caller's choice.

`parse_official` is not this lenient reader: it is the authors' own rule (MASLegalBench's
`parse_string.py`), for the report's official column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

LABELS = {"yes_no": ("Yes", "No"), "abcd": ("A", "B", "C", "D")}
"""The answer labels of each question kind, in display order."""

# Markdown emphasis, code ticks, LEXam-style `###B###` markers and quotes are never part of a
# label, so they are removed everywhere before matching.
_DECORATION = str.maketrans("", "", "*_`#\"'\u201c\u201d\u2018\u2019")
_PREFIX = r"(?:(?:the\s+)?(?:final\s+|correct\s+)?(?:answer|option|choice)(?:\s+is)?\s*[:=\-]?\s*)?"
# After the label: nothing, or a separator and any text ("B. Only the costs...", "No, the
# controller remains responsible"); a bare space does not separate ("A company must..." is no
# answer). A comma separates "Yes"/"No" only: "B, C" names two options.
_ANSWER = {
    "yes_no": re.compile(
        _PREFIX + r"[(\[]?\s*(yes|no)\s*[)\]]?(?:[.,:;!)]|\s+[-\u2013\u2014]\s|$)",
        re.IGNORECASE,
    ),
    "abcd": re.compile(
        _PREFIX + r"[(\[]?\s*([a-d])\s*[)\]]?(?:[.:)]|\s+[-\u2013\u2014]\s|$)",
        re.IGNORECASE,
    ),
}
_STATED = {
    "yes_no": re.compile(
        r"\b(?:final\s+)?answer\b(?:\s+is)?\s*[:=\-]?\s*[(\[]?\s*(yes|no)(?!\w)", re.IGNORECASE
    ),
    "abcd": re.compile(
        r"\b(?:final\s+)?answer\b(?:\s+is)?\s*[:=\-]?\s*[(\[]?\s*(?-i:([A-D]))(?!\w)", re.IGNORECASE
    ),
}
_BARE = {
    "yes_no": re.compile(r"[(\[]?\s*(yes|no)\s*[)\]]?\s*[.!]?", re.IGNORECASE),
    "abcd": re.compile(r"[(\[]?\s*([A-D])\s*[)\]]?\s*[.]?"),
}
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.)*)"', re.IGNORECASE | re.DOTALL)


@dataclass
class ParsedAnswer:
    answer: str | None
    """A label of the question's kind (`LABELS`), or None when the reply gives none."""
    rationale: str
    """The JSON `rationale` (a non-string one as JSON text; "" when absent), or the whole reply
    without its thinking when the answer did not come from a well-formed JSON object."""
    error: str | None
    """Why `answer` is None; None when there is an answer."""


def _labels(kind: str) -> tuple[str, ...]:
    if kind not in LABELS:
        raise ValueError(f"unknown question kind {kind!r}; one of {', '.join(LABELS)}")
    return LABELS[kind]


def normalise_answer(text: str, kind: str) -> str | None:
    """The label (`LABELS[kind]`) a short answer names, or None.

    Case, punctuation and decoration are ignored: "B", "B.", "(b)", "[B]", "Option B", "answer:
    B", "The answer is **B**", "B. Only the costs..." -> "B"; "yes", "YES.", "No,", "No, the
    controller remains responsible" -> the Yes/No label. An answer of the other kind, several
    options, an option's text without its label, or a refusal gives None. `kind` must be one of
    `LABELS` (ValueError otherwise); never raises on any string.
    """
    labels = _labels(kind)
    match = _ANSWER[kind].match(text.translate(_DECORATION).strip())
    if match is None:
        return None
    found = match.group(1).lower()
    return next(label for label in labels if label.lower() == found)


def _thoughts_removed(text: str) -> str:
    text = text.rpartition("</think>")[2]
    return text.partition("<think>")[0].strip()


def _json_objects(text: str) -> list[dict]:
    """Every JSON object in `text` that is not inside another one, in order."""
    decoder = json.JSONDecoder()
    objects: list[dict] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):  # not JSON there, or nested past Python's stack
            index = text.find("{", index + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        index = text.find("{", end)
    return objects


def _field(record: dict, name: str) -> tuple[bool, object]:
    for key, value in record.items():
        if key.lower() == name:
            return True, value
    return False, None


def _from_value(value: object, kind: str, rationale: str) -> ParsedAnswer:
    if not isinstance(value, str):
        return ParsedAnswer(None, rationale, f"`answer` is not a string: {value!r:.80}")
    answer = normalise_answer(value, kind)
    if answer is None:
        labels = ", ".join(LABELS[kind])
        return ParsedAnswer(None, rationale, f"`answer` {value!r:.80} is not one of {labels}")
    return ParsedAnswer(answer, rationale, None)


def parse_reply(text: str, kind: str) -> ParsedAnswer:
    """The answer and rationale of a reply to a question of `kind` (see the module docstring for
    the order in which the forms are tried). Never raises on any string."""
    _labels(kind)
    reply = _thoughts_removed(text)
    for record in reversed(_json_objects(reply)):
        has_answer, value = _field(record, "answer")
        if has_answer:
            _, rationale = _field(record, "rationale")
            if rationale is None:
                rationale = ""
            elif not isinstance(rationale, str):
                rationale = json.dumps(rationale, ensure_ascii=False)
            return _from_value(value, kind, rationale)
    fields = _ANSWER_FIELD.findall(reply)
    if fields:
        try:
            value = json.loads(f'"{fields[-1]}"')
        except ValueError:  # an escape JSON does not know ("\x"): take the text as written
            value = fields[-1]
        return _from_value(value, kind, reply)
    stated = _STATED[kind].findall(reply.translate(_DECORATION))
    if stated:
        return _from_value(stated[-1], kind, reply)
    bare = _BARE[kind].fullmatch(reply.translate(_DECORATION).strip())
    if bare:
        return _from_value(bare.group(1), kind, reply)
    return ParsedAnswer(
        None, reply, "no JSON object with an `answer`, no stated answer and no bare label"
    )


_FIRST_BRACES = re.compile(r"\{.*?\}", re.DOTALL)
_JSON_FENCE = re.compile(r"```json(.*?)```", re.DOTALL | re.IGNORECASE)


@dataclass(frozen=True)
class OfficialAnswer:
    """A reply read by the MASLegalBench authors' rule (`parse_official`)."""

    parsed: bool
    """False when their parser raises: the reply is dropped from their accuracy's denominator."""
    decision: object = None
    """The raw `answer` value, neither normalised nor checked against the options (a string
    such as "B." or "yes", a number, None): their `eval.py` compares it to the label with `==`."""


def parse_official(text: str) -> OfficialAnswer:
    """The answer of a reply as the MASLegalBench authors' `Parser.parse_answer`
    (HKUST-KnowComp/MASLegalBench, `parse_string.py`, read against commit c74d374) takes it:

    1. `json.loads` of the whole reply, then its `["answer"]`; any failure (not JSON, not an
       object, no `answer` key) falls through to step 2;
    2. else the FIRST `{...}` (non-greedy `\\{.*?\\}`: up to the first `}`, so a nested object
       or a `}` in the rationale cuts it short), `json.loads` of it and its `["answer"]`; here a
       failure is NOT caught: the reply is unparsable;
    3. else, only when the reply holds no `{...}` at all, the first ```json fence's content, the
       same way. (Any JSON object holds a `{...}`, so after step 2 found none this step cannot
       give an answer; it is kept to mirror their code.)

    The key is `answer` exactly (case matters), thinking is not removed (their HF and API
    replies are scored whole), and the value is returned as it stands. `eval.py` then counts
    `decision == label` and leaves a reply whose parse raised out of `results` (after
    `generation_round` re-samples; one reply per episode here, so it is simply dropped).
    Never raises on any string."""
    try:
        return OfficialAnswer(True, json.loads(text)["answer"])
    except Exception:  # their bare `except:` takes every failure to the next step
        pass
    for pattern, group in ((_FIRST_BRACES, 0), (_JSON_FENCE, 1)):
        match = pattern.search(text)
        if match:
            try:
                return OfficialAnswer(True, json.loads(match.group(group).strip())["answer"])
            except Exception:  # raised out of their parser: the reply is dropped
                return OfficialAnswer(False)
    return OfficialAnswer(False)


_SUBTASK = re.compile(
    r"^[\s>*\-\d.)]*\**\s*(?P<agent>[A-Za-z]{1,2})\s*\**\s*[:\-\u2013]\s*(?P<task>\S.*)$"
)


@dataclass
class Decomposition:
    """The live form's sub-tasks: `(agent, sub-task)` pairs in the Meta-LLM's order."""

    subtasks: list[tuple[str, str]]
    invalid: int
    """Lines with text that name no agent, and sub-tasks beyond the limit: invalid actions."""


def parse_subtasks(text: str, agents: tuple[str, ...], max_subtasks: int) -> Decomposition:
    """Read `<agent>: <sub-task>` lines (list markers and emphasis allowed; the agent name in
    any case) from a decomposition; other non-blank lines and lines past `max_subtasks` count
    as invalid. Never raises on any string."""
    subtasks: list[tuple[str, str]] = []
    invalid = 0
    by_name = {agent.lower(): agent for agent in agents}
    for line in _thoughts_removed(text).splitlines():
        if not line.strip():
            continue
        match = _SUBTASK.match(line)
        agent = by_name.get(match.group("agent").lower()) if match else None
        if agent is None or len(subtasks) >= max_subtasks:
            invalid += 1
            continue
        subtasks.append((agent, match.group("task").strip()))
    return Decomposition(subtasks, invalid)
