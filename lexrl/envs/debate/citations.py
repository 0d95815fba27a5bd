"""Brazilian legal citations: a regex parser that writes every citation in one canonical form,
and the citation precision / recall / F1 of the OAB open-ended task (the MAD_legal technical
report, "Multi-Agent Debate for Brazilian Legal Reasoning" (2024), secs. 5.2.1 and 6.1). Exact
matching of canonical strings, as the report: a near miss (the right
law, another article) scores nothing.

Canonical form, one string per citation:

    Art. 6º, XXII, Lei 14.133/2021      "art. 6º, inciso XXII, da Lei nº 14.133/21"
    Art. 74, § 1º, CF/88                "Art. 74, § 1º, CF/88", "§ 1º do art. 74 da CRFB"
    Art. 5º, LXIX, CF/88                "Art. 5, inciso LXIX, CF/88" (the OAB release's spelling)
    Art. 102, I, a, CF/88               "alínea "a" do inciso I do art. 102 da Constituição"
    Art. 927, parágrafo único, CC       "parágrafo único do art. 927 do Código Civil"
    Art. 37, CF/88                      "artigo 37, caput, da Constituição Federal de 1988"
    Art. 1.228, CC                      "art. 1228 do CC/2002"
    Art. 121-A, CP                      "art. 121-A do Código Penal"
    Lei 8.112/1990                      "Lei n. 8.112/90", "Lei nº 8.112, de 11 de dezembro de 1990"
    LC 101/2000                         "Lei Complementar nº 101/2000"
    Súmula 473 STF                      "Súmula 473 do STF", "súmula nº 473 do Supremo Tribunal ..."
    Súmula 331, IV, TST                 "Súmula nº 331, item IV, do TST"
    Súmula Vinculante 13                "Súmula Vinculante nº 13 do STF", "SV 13"

- Articles and paragraphs 1 to 9 are ordinals ("Art. 5º", "§ 2º"), from 10 on cardinals
  ("Art. 10", "§ 10"), whatever the writer put ("5", "5o", "5°", "10º"): the drafting rule of
  LC 95/1998 art. 10, I. Numbers from 1,000 take a thousands dot ("Art. 1.228"), as do law
  numbers ("Lei 14.133", also when written "14133"). A letter suffix is kept ("Art. 121-A").
- Components in the order article, paragraph ("§ 1º", "parágrafo único"), inciso (upper-case
  roman numeral, without the word "inciso"), alínea (lower-case letter, without "alínea").
  "caput" is dropped: an article cited without a subdivision is its caput, so "art. 37,
  caput" and "art. 37" are one citation and a near-identical pair is no miss. Citations
  written the other way round ("inciso XXII do art. 6º") are put in this order. A list
  ("arts. 186 e 927", "incisos XXXV e LV", "§§ 1º e 2º") is one citation per item; "art. 319
  e seguintes do CPC" is "Art. 319, CPC".
- The source ends the citation: a code or a numbered act (below), written after the article
  or just before it with a comma ("(CF/88, art. 5º, XXXV)"). An article without one takes the
  next article's when only a connector separates them ("art. 186 e art. 927, ambos do CC",
  "art. 121, § 2º, IV, c/c art. 14, II, do CP"), never an earlier one's; else it is dropped:
  "o art. 5º garante..." names no statute, so it cannot be matched exactly.
- Codes (abbreviation case-sensitive, long names in any case, accents optional): CF/88 ("CF",
  "CRFB", "CF/1988", "CR/88", "Constituição Federal", "Constituição da República", "a
  Constituição", not "Constituição Estadual"), CP ("Código Penal", "CPB"; not the military
  code), CPP, CC ("Código Civil", "CCB", "CC/02", "NCC"), CPC ("Código de Processo Civil",
  "NCPC", "novo CPC", "CPC/2015"), CLT ("Consolidação das Leis do Trabalho"), CTN, CDC ("Código
  de (Proteção e) Defesa do Consumidor"), ECA ("Estatuto da Criança e do Adolescente"). Another
  edition than the one in force keeps its year: "CPC/1973", "CC/1916", "CF/1967". An article
  of the act that enacted a code is an article of the code: "art. 6º da Lei 8.078/90" is "Art.
  6º, CDC" (Lei 10.406/2002 CC, Lei 13.105/2015 CPC, Lei 5.172/1966 CTN, Lei 8.069/1990 ECA,
  Decreto-Lei 2.848/1940 CP, 3.689/1941 CPP, 5.452/1943 CLT). A code on its own ("nos termos
  do CPC") is no citation: it names no rule.
- Numbered acts: "Lei", "LC" (Lei Complementar), "Decreto-Lei" ("DL"), "Decreto", "EC" (Emenda
  Constitucional); "nº", "n.", "n°", "n.º", "número" and "Federal" ("Lei Federal nº") dropped.
  State and municipal laws ("Lei Estadual nº ...") are not read: their numbers collide with
  federal ones. The year, written "/21", "/2021" or ", de 1º de abril de 2021", is four
  digits; two digits are widened with the pivot 30 ("90" -> 1990, "21" -> 2021, "30" ->
  2030, "31" -> 1931), except a code's edition year, widened to that code's edition ("CC/16"
  -> 1916). A law written without its year takes the year it has elsewhere in the same text,
  else stays without one ("Lei 8.112"). Each act mentioned on its own is a citation; one inside
  an article citation is not counted again ("Lei 14.133/21" in "Art. 6º, inciso XXII, da Lei
  nº 14.133/21").
- Súmulas: a court is needed (STF, STJ, TST, TSE, STM, TNU, or its full name) except for the
  STF's binding ones ("Súmula Vinculante 13", "SV 13"); a TST item is kept ("Súmula 331, IV,
  TST"); "Súmulas 282 e 356 do STF" is two.

Every canonical string parses back to itself, so a list of citations written by hand (the OAB
release's `key_citations_expected`) is normalised by `extract_citations` on each entry.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice, product

# Two-digit years up to the pivot are this century's; Brazilian law cited with a two-digit
# year runs from the 1930s, so "31".."99" are last century's.
_YEAR_PIVOT = 30

# The edition in force first; the others only name themselves when cited with their year.
_EDITIONS = {
    "CF": (1988, 1967, 1946, 1937, 1934, 1891, 1824),
    "CP": (1940,),
    "CPP": (1941,),
    "CC": (2002, 1916),
    "CPC": (2015, 1973, 1939),
    "CLT": (1943,),
    "CTN": (1966,),
    "CDC": (1990,),
    "ECA": (1990,),
}

# (act, number) -> (code, year of the act): numbers are unique per kind of act, so the year only
# has to agree when it is written.
_ACTS_OF_CODES = {
    ("Lei", 10406): ("CC", 2002),
    ("Lei", 13105): ("CPC", 2015),
    ("Lei", 5172): ("CTN", 1966),
    ("Lei", 8078): ("CDC", 1990),
    ("Lei", 8069): ("ECA", 1990),
    ("Decreto-Lei", 2848): ("CP", 1940),
    ("Decreto-Lei", 3689): ("CPP", 1941),
    ("Decreto-Lei", 5452): ("CLT", 1943),
}

_CODE_ALIASES = {
    "CF": (
        r"(?-i:CRFB|CF)(?!\w)",
        r"(?-i:CR)(?=\s*/\s*(?:19)?88(?!\d))",
        r"constitui[çc][ãa]o(?:\s+federal|\s+da\s+rep[úu]blica(?:\s+federativa\s+do\s+brasil)?)?"
        r"(?!\s+(?:estadual|do\s+estado)|\w)",
    ),
    "CP": (r"(?-i:CPB?)(?!\w)", r"c[óo]digo\s+penal(?!\s+militar)(?:\s+brasileiro)?(?!\w)"),
    "CPP": (r"(?-i:CPP)(?!\w)", r"c[óo]digo\s+de\s+processo\s+penal(?!\s+militar|\w)"),
    "CC": (
        r"(?-i:CCB|CC|NCC)(?!\w)",
        r"(?:novo\s+)?c[óo]digo\s+civil(?:\s+brasileiro)?(?!\w)",
    ),
    "CPC": (
        r"(?:novo\s+)?(?-i:N?CPC)(?!\w)",
        r"(?:novo\s+)?c[óo]digo\s+de\s+processo\s+civil(?!\w)",
    ),
    "CLT": (r"(?-i:CLT)(?!\w)", r"consolida[çc][ãa]o\s+das\s+leis\s+do\s+trabalho(?!\w)"),
    "CTN": (r"(?-i:CTN)(?!\w)", r"c[óo]digo\s+tribut[áa]rio\s+nacional(?!\w)"),
    "CDC": (
        r"(?-i:CDC)(?!\w)",
        r"c[óo]digo\s+de\s+(?:prote[çc][ãa]o\s+e\s+)?defesa\s+do\s+consumidor(?!\w)",
    ),
    "ECA": (
        r"(?-i:ECA)(?!\w)",
        r"estatuto\s+da\s+crian[çc]a\s+e\s+do\s+adolescente(?!\w)",
    ),
}

_FLAGS = re.IGNORECASE
# Lists multiply ("arts. 1 a 300, incisos I a CCC"): a degenerate generation must not exhaust
# memory, and no real citation lists this many rules.
_MAX_EXPANSION = 1000
# A number with or without thousands dots, at most nine digits: int() of a digit string has a
# length limit, and no article or law number comes close.
_NUMBER = r"(?:\d{1,3}(?:\.\d{3}){1,2}|\d{1,6})(?![\d])"
# "º", "°", "ª", "ᵒ" or a letter o ("1o"), also after a dot ("5.º").
_ORDINAL = r"(?:\s?\.?[º°ªᵒ]|o(?!\w))?"
_SUFFIX = r"(?:-(?-i:[A-Z])(?!\w))?"
_ROMAN = r"(?-i:(?=[IVXLCDM])M{0,3}(?:CM|CD|D?C{0,3})(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3}))(?!\w)"
_QUOTE = "[\"'“”‘’]?"
_LIST_SEP = re.compile(r"\s*,\s*(?:(?:e|ou)\s+)?|\s+(?:e|ou)\s+", _FLAGS)
_NUMBER_NO = r"(?:n(?:\.?\s?[º°o]|\.)\.?|n[úu]mero)"

_ARTICLE = re.compile(r"\b(?:artigos?|arts?)\b\.?\s*", _FLAGS)
_ARTICLE_NUMBER = re.compile(rf"(?P<n>{_NUMBER}){_ORDINAL}(?P<s>{_SUFFIX})", _FLAGS)
_FOLLOWING = re.compile(r"\s+e\s+(?:seguintes|ss)\b\.?", _FLAGS)
_PARAGRAPH = re.compile(r"(?:§§?|par[áa]grafos?)\s*", _FLAGS)
_PARAGRAPH_ITEM = re.compile(
    rf"(?P<u>[úu]nico\b)|(?P<n>{_NUMBER}){_ORDINAL}(?P<s>{_SUFFIX})", _FLAGS
)
_INCISO = re.compile(r"(?:\bincisos?\b|\bincs?\.)\s*", _FLAGS)
_ROMAN_ITEM = re.compile(_ROMAN, _FLAGS)
_ALINEA = re.compile(r"\bal[íi]neas?\b\s*", _FLAGS)
_LETTER_ITEM = re.compile(rf"{_QUOTE}(?P<l>[a-z]){_QUOTE}(?!\w)", _FLAGS)
_BARE_LETTER = re.compile(rf"{_QUOTE}(?P<l>(?-i:[a-z])){_QUOTE}(?=\s*(?:,|d[oa]s?\s))", _FLAGS)
_CAPUT = re.compile(r"[*_\"'“]?caput\b[*_\"'”]?", _FLAGS)
_COMPONENT_SEP = re.compile(r"\s*,?\s*")
# "inciso I do § 1º do art. 5º": the joint of a citation written from the inside out.
_OF = re.compile(r"\s*,?\s*d[oa]s?\s+", _FLAGS)
_LINK = re.compile(
    r"(?:\s*,)?\s*(?:(?:ambos|ambas|todos|todas)\s+)?(?:(?:d[oa]s?|n[oa]s?)\s+)?", _FLAGS
)
# What may separate an article without a source from the next one, which lends it its source.
_CONNECTOR = re.compile(
    r"\s*[,;]?\s*(?:(?:e|ou|bem\s+como|c/c|c\.c\.|combinad[oa]\s+com)\s*)?(?:[dn]?[oa]s?\s+)?",
    _FLAGS,
)
_START = re.compile(
    r"\b(?:artigos?|arts?|incisos?|al[íi]neas?|par[áa]grafos?|caput)\b|\bincs?\.|§", _FLAGS
)

# "CF/88", "CF / 1988", "CF-88", "CF de 1988"; not "CF - 20 anos".
_CODE_YEAR = r"(?:(?:\s*/\s*|-)(?P<cy>\d{4}|\d{2})(?!\d)|\s+de\s+(?P<cy4>\d{4})(?!\d))?"
_CODE = re.compile(
    "(?:"
    + "|".join(f"(?P<{code}>{'|'.join(aliases)})" for code, aliases in _CODE_ALIASES.items())
    + ")"
    + _CODE_YEAR,
    _FLAGS,
)
_CODE_ANYWHERE = re.compile(r"(?<!\w)(?:" + _CODE.pattern + ")", _FLAGS)
_COMMA = re.compile(r"\s*,\s*")
_ACT = re.compile(
    r"\b(?P<kind>lei\s+complementar|(?-i:LC)|decreto[\s-]+lei|(?-i:DL)|decreto"
    r"|emenda\s+constitucional|(?-i:EC)|lei)(?:\s+federal)?\s*"
    rf"(?:{_NUMBER_NO}\s*)?(?P<n>{_NUMBER})"
    r"(?:\s*/\s*(?P<y>\d{4}|\d{2})(?!\d)"
    rf"|,?\s+de\s+(?:\d{{1,2}}{_ORDINAL}\s+de\s+[a-zç]+\s+de\s+)?(?P<y4>\d{{4}})(?!\d))?",
    _FLAGS,
)
_ACT_KINDS = {
    "lei": "Lei",
    "lei complementar": "LC",
    "lc": "LC",
    "decreto lei": "Decreto-Lei",
    "dl": "Decreto-Lei",
    "decreto": "Decreto",
    "emenda constitucional": "EC",
    "ec": "EC",
}
# "(Lei 8.078/90)" after "do CDC", or "(CDC)" after the law: the same source said twice.
_OPENING = re.compile(r"\s*\(\s*")
_CLOSING = re.compile(r"\s*\)")

_COURT_NAMES = {
    "STF": r"(?-i:STF)|supremo\s+tribunal\s+federal",
    "STJ": r"(?-i:STJ)|superior\s+tribunal\s+de\s+justi[çc]a",
    "TST": r"(?-i:TST)|tribunal\s+superior\s+do\s+trabalho",
    "TSE": r"(?-i:TSE)|tribunal\s+superior\s+eleitoral",
    "STM": r"(?-i:STM)|superior\s+tribunal\s+militar",
    "TNU": r"(?-i:TNU)|turma\s+nacional\s+de\s+uniformiza[çc][ãa]o",
}
_COURT = "|".join(f"(?P<{court}>{names})" for court, names in _COURT_NAMES.items())
_SUMULA = re.compile(
    r"\bs[úu]mulas?(?P<v>\s+vinculantes?)?\b\s*"
    rf"(?:{_NUMBER_NO}\s*)?(?P<nums>\d{{1,4}}(?:(?:\s*,\s*|\s+e\s+)\d{{1,4}})*)(?!\d)"
    rf"(?:\s*,\s*(?:item\s+)?(?P<item>{_ROMAN}))?"
    rf"(?:\s*,?\s*(?:d[oa]\s+|/\s*|-\s*)?(?:{_COURT})(?!\w))?",
    _FLAGS,
)
_BINDING_SHORT = re.compile(rf"\b(?-i:SV)\s*(?:{_NUMBER_NO}\s*)?(?P<nums>\d{{1,4}})(?!\d)", _FLAGS)
_SUMULA_NUMBERS = re.compile(r"\d+")


@dataclass(frozen=True)
class _Act:
    kind: str
    number: int
    year: int | None


@dataclass
class _Article:
    start: int
    end: int
    numbers: list[str]
    components: list[list[str]]
    source: str | _Act | None


def _widen(year: str, editions: Iterable[int] = ()) -> int:
    if len(year) == 4:
        return int(year)
    short = int(year)
    for edition in editions:
        if edition % 100 == short:
            return edition
    return (2000 if short <= _YEAR_PIVOT else 1900) + short


def _thousands(number: int) -> str:
    return f"{number:,}".replace(",", ".")


def _numbered(digits: str, suffix: str) -> str:
    """An article or paragraph number: ordinal up to 9, cardinal from 10 (LC 95/1998 art. 10)."""
    number = int(digits.replace(".", ""))
    text = f"{number}º" if number < 10 else _thousands(number)
    return text + suffix.upper()


def _code(match: re.Match[str]) -> str:
    code = next(name for name in _CODE_ALIASES if match.group(name) is not None)
    year = match.group("cy") or match.group("cy4")
    editions = _EDITIONS[code]
    widened = _widen(year, editions) if year else editions[0]
    if widened == editions[0]:
        return "CF/88" if code == "CF" else code
    return f"{code}/{widened}"


def _act(match: re.Match[str]) -> _Act:
    kind = _ACT_KINDS[re.sub(r"[\s-]+", " ", match.group("kind").lower())]
    year = match.group("y") or match.group("y4")
    return _Act(kind, int(match.group("n").replace(".", "")), _widen(year) if year else None)


def _bare_source_at(text: str, pos: int) -> tuple[str | _Act, int] | None:
    act = _ACT.match(text, pos)
    if act is not None:
        return _act(act), act.end()
    code = _CODE.match(text, pos)
    return (_code(code), code.end()) if code is not None else None


def _leading_sources(text: str) -> dict[int, tuple[str | _Act, int]]:
    """Sources written before their article ("(CF/88, art. 5º, XXXV)"): where the article would
    start after the comma -> (source, where the source starts)."""
    leading: dict[int, tuple[str | _Act, int]] = {}
    for match in _ACT.finditer(text):
        comma = _COMMA.match(text, match.end())
        if comma is not None:
            leading[comma.end()] = (_act(match), match.start())
    for match in _CODE_ANYWHERE.finditer(text):
        comma = _COMMA.match(text, match.end())
        if comma is not None:
            leading[comma.end()] = (_code(match), match.start())
    return leading


def _source_at(text: str, pos: int) -> tuple[str | _Act, int] | None:
    """The code or act at `pos`, after any joining words ("da", ", ambos do"), with a restating
    parenthesis ("do CDC (Lei 8.078/90)") taken in."""
    source = _bare_source_at(text, _LINK.match(text, pos).end())
    if source is None:
        return None
    opening = _OPENING.match(text, source[1])
    restated = _bare_source_at(text, opening.end()) if opening else None
    closing = _CLOSING.match(text, restated[1]) if restated else None
    return (source[0], closing.end()) if closing else source


def _items(text: str, pos: int, item: re.Pattern[str]) -> tuple[list[re.Match[str]], int]:
    """Matches of `item` from `pos` joined by commas, "e" or "ou"; none when the first fails."""
    first = item.match(text, pos)
    if first is None:
        return [], pos
    found = [first]
    while True:
        separator = _LIST_SEP.match(text, found[-1].end())
        following = item.match(text, separator.end()) if separator else None
        if following is None:
            return found, found[-1].end()
        found.append(following)


def _paragraphs(matches: list[re.Match[str]]) -> list[str]:
    return [
        "parágrafo único" if m.group("u") else f"§ {_numbered(m.group('n'), m.group('s'))}"
        for m in matches
    ]


def _keyword_component(text: str, pos: int) -> tuple[str, list[str], int] | None:
    """A component introduced by its word: (kind, values, end); "caput" has no value."""
    caput = _CAPUT.match(text, pos)
    if caput is not None:
        return "caput", [], caput.end()
    for kind, keyword, item in (
        ("paragraph", _PARAGRAPH, _PARAGRAPH_ITEM),
        ("inciso", _INCISO, _ROMAN_ITEM),
        ("alinea", _ALINEA, _LETTER_ITEM),
    ):
        word = keyword.match(text, pos)
        if word is None:
            continue
        matches, end = _items(text, word.end(), item)
        if not matches:
            return None
        if kind == "paragraph":
            return kind, _paragraphs(matches), end
        if kind == "inciso":
            return kind, [m.group() for m in matches], end
        return kind, [m.group("l").lower() for m in matches], end
    return None


def _component(
    text: str, pos: int, after_comma: bool, previous: str | None
) -> tuple[str, list[str], int] | None:
    """A component after an article or another component: introduced by its word, or, after a
    comma, a bare roman numeral (inciso) or, after an inciso, a bare letter (alínea)."""
    found = _keyword_component(text, pos)
    if found is not None or not after_comma:
        return found
    matches, end = _items(text, pos, _ROMAN_ITEM)
    if matches:
        return "inciso", [m.group() for m in matches], end
    letter = _BARE_LETTER.match(text, pos) if previous == "inciso" else None
    if letter is not None:
        return "alinea", [letter.group("l")], letter.end()
    return None


def _article_at(text: str, start: int) -> _Article | None:
    """The article citation starting at `start`, written either way round."""
    prefix: list[list[str]] = []
    pos = start
    while (keyword := _ARTICLE.match(text, pos)) is None:
        found = _keyword_component(text, pos)
        joint = _OF.match(text, found[2]) if found else None
        if joint is None:
            return None
        prefix.append(found[1])
        pos = joint.end()
    numbers, end = _items(text, keyword.end(), _ARTICLE_NUMBER)
    if not numbers:
        return None
    following = _FOLLOWING.match(text, end)
    if following is not None:
        end = following.end()
    components: list[list[str]] = []
    previous = None
    while True:
        source = _source_at(text, end)
        if source is not None:
            break
        separator = _COMPONENT_SEP.match(text, end)
        found = _component(text, separator.end(), "," in separator.group(), previous)
        if found is None:
            break
        previous, values, end = found
        components.append(values)
    return _Article(
        start,
        source[1] if source else end,
        [_numbered(m.group("n"), m.group("s")) for m in numbers],
        [values for values in components + prefix[::-1] if values],
        source[0] if source else None,
    )


def _articles(text: str) -> list[_Article]:
    """Article citations in order, each with a source: its own, one written just before it
    ("CPC, art. 300"), or the next article's when only connectors lie between; else dropped."""
    leading = _leading_sources(text)
    articles: list[_Article] = []
    waiting: list[_Article] = []
    pos = 0
    while (start := _START.search(text, pos)) is not None:
        article = _article_at(text, start.start())
        if article is None:
            pos = start.end()
            continue
        pos = article.end
        if article.source is None and article.start in leading:
            article.source, article.start = leading[article.start]
        if waiting and _CONNECTOR.fullmatch(text, waiting[-1].end, article.start) is None:
            waiting = []
        if article.source is None:
            waiting.append(article)
        else:
            for borrower in waiting:
                borrower.source = article.source
            articles.extend([*waiting, article])
            waiting = []
    return articles


def _render_act(act: _Act, years: dict[tuple[str, int], int], in_article: bool) -> str:
    year = act.year if act.year is not None else years.get((act.kind, act.number))
    if in_article and (act.kind, act.number) in _ACTS_OF_CODES:
        code, enacted = _ACTS_OF_CODES[(act.kind, act.number)]
        if year is None or year == enacted:
            return code
    number = _thousands(act.number)
    return f"{act.kind} {number}/{year}" if year is not None else f"{act.kind} {number}"


def _sumulas(text: str) -> list[tuple[int, list[str]]]:
    found = []
    for match in _SUMULA.finditer(text):
        numbers = _SUMULA_NUMBERS.findall(match.group("nums"))
        if match.group("v"):
            found.append((match.start(), [f"Súmula Vinculante {int(n)}" for n in numbers]))
            continue
        court = next((c for c in _COURT_NAMES if match.group(c) is not None), None)
        if court is None:
            continue
        item = f", {match.group('item')}," if match.group("item") else ""
        found.append((match.start(), [f"Súmula {int(n)}{item} {court}" for n in numbers]))
    for match in _BINDING_SHORT.finditer(text):
        found.append((match.start(), [f"Súmula Vinculante {int(match.group('nums'))}"]))
    return found


def extract_citations(text: str) -> list[str]:
    """The legal citations in `text`, canonical (see the module docstring), each once, in order
    of first appearance. Never raises on any string."""
    text = unicodedata.normalize("NFC", text)
    acts = [(m.start(), m.end(), _act(m)) for m in _ACT.finditer(text)]
    years: dict[tuple[str, int], int] = {}
    for _, _, act in acts:
        if act.year is not None:
            years.setdefault((act.kind, act.number), act.year)
    articles = _articles(text)
    found: list[tuple[int, list[str]]] = []
    for article in articles:
        source = article.source
        if isinstance(source, _Act):
            source = _render_act(source, years, in_article=True)
        found.append(
            (
                article.start,
                [
                    ", ".join(("Art. " + number, *chosen, source))
                    for number, *chosen in islice(
                        product(article.numbers, *article.components), _MAX_EXPANSION
                    )
                ],
            )
        )
    for start, end, act in acts:
        if not any(a.start <= start and end <= a.end for a in articles):
            found.append((start, [_render_act(act, years, in_article=False)]))
    found.extend(_sumulas(text))
    found.sort(key=lambda entry: entry[0])
    return list(dict.fromkeys(citation for _, citations in found for citation in citations))


def citation_scores(predicted: list[str], expected: list[str]) -> dict[str, float]:
    """Precision, recall and F1 of the set of `predicted` citations against the set of
    `expected` ones, by exact string match (the report's sec. 5.2.1): pass both through
    `extract_citations` first. Both empty: 1, 1, 1 (nothing to cite, nothing cited); exactly
    one empty: 0, 0, 0 (lexrl's rule; the report leaves it open)."""
    cited, wanted = set(predicted), set(expected)
    if not cited and not wanted:
        return {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    hits = len(cited & wanted)
    precision = hits / len(cited) if cited else 0.0
    recall = hits / len(wanted) if wanted else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}
