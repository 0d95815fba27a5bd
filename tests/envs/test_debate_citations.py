import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexrl.envs.debate.citations import citation_scores, extract_citations

# Every expectation is written by hand in the canonical form of the module docstring.
SENTENCES = [
    # Article + code (seed 6.1, pattern 1).
    (
        "A competência está prevista no Art. 74, § 1º, CF/88.",
        ["Art. 74, § 1º, CF/88"],
    ),
    ("O crime de homicídio está tipificado no art. 121 do CP.", ["Art. 121, CP"]),
    (
        "Cabe mandado de segurança, nos termos do Art. 5º, LXIX, da CRFB/88.",
        ["Art. 5º, LXIX, CF/88"],
    ),
    (
        "A responsabilidade objetiva do Estado decorre do art. 37, § 6º, da Constituição Federal.",
        ["Art. 37, § 6º, CF/88"],
    ),
    (
        "O artigo 5º, caput, da Constituição da República assegura a igualdade.",
        ["Art. 5º, CF/88"],
    ),
    (
        "A ação rescisória segue o art. 966 do Código de Processo Civil.",
        ["Art. 966, CPC"],
    ),
    (
        "A prescrição penal observa o artigo 109 do Código Penal.",
        ["Art. 109, CP"],
    ),
    ("O prazo é o do art. 1.228 do Código Civil.", ["Art. 1.228, CC"]),
    ("Aplica-se o art. 1228 do CC/2002.", ["Art. 1.228, CC"]),
    ("O feminicídio estava no art. 121-A do Código Penal.", ["Art. 121-A, CP"]),
    (
        "A justa causa exige as hipóteses do art. 482 da CLT.",
        ["Art. 482, CLT"],
    ),
    (
        "O lançamento é definido no art. 142 do CTN.",
        ["Art. 142, CTN"],
    ),
    (
        "Há inversão do ônus da prova (art. 6º, VIII, do CDC).",
        ["Art. 6º, VIII, CDC"],
    ),
    (
        "A medida socioeducativa observa o art. 112 do Estatuto da Criança e do Adolescente.",
        ["Art. 112, ECA"],
    ),
    (
        "A prisão preventiva exige os requisitos do art. 312 do Código de Processo Penal.",
        ["Art. 312, CPP"],
    ),
    # Article + law (pattern 2).
    (
        "A definição consta do Art. 6º, inciso XXII, da Lei nº 14.133/21.",
        ["Art. 6º, XXII, Lei 14.133/2021"],
    ),
    (
        "O writ tem rito próprio, conforme o art. 1º da Lei 12.016/2009.",
        ["Art. 1º, Lei 12.016/2009"],
    ),
    (
        "A posse em cargo público segue o art. 13 da Lei n. 8.112/90.",
        ["Art. 13, Lei 8.112/1990"],
    ),
    (
        "Vale o art. 20 da Lei nº 14.133, de 1º de abril de 2021.",
        ["Art. 20, Lei 14.133/2021"],
    ),
    (
        "O Simples Nacional está no art. 3º da Lei Complementar nº 123/2006.",
        ["Art. 3º, LC 123/2006"],
    ),
    # Standalone acts (pattern 3).
    ("O regime jurídico dos servidores é a Lei 8.112/1990.", ["Lei 8.112/1990"]),
    ("A nova lei de licitações (Lei nº 14.133/21) revogou a anterior.", ["Lei 14.133/2021"]),
    ("A Lei n. 8.666/93 foi revogada.", ["Lei 8.666/1993"]),
    ("A Lei Complementar 101/2000 é a Lei de Responsabilidade Fiscal.", ["LC 101/2000"]),
    ("A desapropriação segue o Decreto-Lei nº 3.365/41.", ["Decreto-Lei 3.365/1941"]),
    ("A EC 45/2004 criou o CNJ.", ["EC 45/2004"]),
    (
        "O estatuto é a Lei nº 8.112, de 11 de dezembro de 1990.",
        ["Lei 8.112/1990"],
    ),
    # Súmulas (pattern 4).
    ("A Administração pode anular seus atos (Súmula 473 STF).", ["Súmula 473 STF"]),
    ("Conforme a Súmula 473 do STF, os atos nulos podem ser anulados.", ["Súmula 473 STF"]),
    ("O nepotismo é vedado pela Súmula Vinculante 13.", ["Súmula Vinculante 13"]),
    (
        "A terceirização segue o enunciado da Súmula nº 331 do TST.",
        ["Súmula 331 TST"],
    ),
    (
        "O tomador responde subsidiariamente (Súmula 331, item IV, do TST).",
        ["Súmula 331, IV, TST"],
    ),
    ("Não cabe reexame de prova em recurso especial (Súmula 7/STJ).", ["Súmula 7 STJ"]),
    (
        "Aplicam-se as Súmulas 282 e 356 do Supremo Tribunal Federal.",
        ["Súmula 282 STF", "Súmula 356 STF"],
    ),
    ("A SV 13 proíbe o nepotismo.", ["Súmula Vinculante 13"]),
    # Components written from the inside out, lists, shared sources.
    (
        "O § 1º do art. 74 da CRFB trata da denúncia ao Tribunal de Contas.",
        ["Art. 74, § 1º, CF/88"],
    ),
    (
        "Compete ao STF julgar, nos termos da alínea a do inciso I do art. 102 da Constituição.",
        ["Art. 102, I, a, CF/88"],
    ),
    ("A imunidade está no art. 150, VI, “c”, da CF.", ["Art. 150, VI, c, CF/88"]),
    (
        "A responsabilidade é objetiva (parágrafo único do art. 927 do Código Civil).",
        ["Art. 927, parágrafo único, CC"],
    ),
    (
        "O ato ilícito gera dever de indenizar (arts. 186 e 927 do CC).",
        ["Art. 186, CC", "Art. 927, CC"],
    ),
    (
        "Incidem o art. 186 e o art. 927, ambos do Código Civil.",
        ["Art. 186, CC", "Art. 927, CC"],
    ),
    (
        "Houve tentativa de homicídio qualificado: art. 121, § 2º, IV, c/c art. 14, II, do CP.",
        ["Art. 121, § 2º, IV, CP", "Art. 14, II, CP"],
    ),
    (
        "O contraditório e a ampla defesa (art. 5º, incisos XXXV e LV, da CF) foram violados.",
        ["Art. 5º, XXXV, CF/88", "Art. 5º, LV, CF/88"],
    ),
    ("A petição inicial segue os arts. 319 e seguintes do CPC.", ["Art. 319, CPC"]),
    ("O juízo é natural (CF/88, art. 5º, XXXVII).", ["Art. 5º, XXXVII, CF/88"]),
    (
        "O roubo com arma de fogo agrava a pena (art. 157, § 2º-A, I, do CP).",
        ["Art. 157, § 2º-A, I, CP"],
    ),
    # Editions and the acts that enacted a code.
    ("O cumprimento de sentença era o art. 475-J do CPC/73.", ["Art. 475-J, CPC/1973"]),
    ("O art. 1º do CC/16 tratava da matéria.", ["Art. 1º, CC/1916"]),
    ("O art. 6º da Lei 8.078/90 lista os direitos básicos.", ["Art. 6º, CDC"]),
    ("O art. 59 do Decreto-Lei 2.848/40 fixa a pena.", ["Art. 59, CP"]),
    # No citation: no source, another statute, no court, or no legal text at all.
    ("O art. 5º garante direitos fundamentais.", []),
    ("O art. 9º da Constituição Estadual trata do tema.", []),
    ("O art. 9º do Código Penal Militar define o crime militar.", []),
    ("Nos termos do CPC e da CF/88, o recurso é cabível.", []),
    ("A Súmula 473 é antiga.", []),
    ("A resposta correta é a alternativa B, pois o contrato é nulo.", []),
    ("", []),
]


@pytest.mark.parametrize(("text", "expected"), SENTENCES)
def test_citations_in_sentences(text, expected):
    assert extract_citations(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Two-digit years around the pivot 30; four digits kept.
        ("Lei 9.099/95", ["Lei 9.099/1995"]),
        ("Lei 13.467/17", ["Lei 13.467/2017"]),
        ("Lei 99/30", ["Lei 99/2030"]),
        ("Decreto 20.910/32", ["Decreto 20.910/1932"]),
        ("Lei 8.112/1990", ["Lei 8.112/1990"]),
        # CF, CRFB, CF/1988 and the long names are all CF/88.
        ("art. 5º da CF", ["Art. 5º, CF/88"]),
        ("art. 5º da CRFB", ["Art. 5º, CF/88"]),
        ("art. 5º da CF/1988", ["Art. 5º, CF/88"]),
        ("art. 5º da CR/88", ["Art. 5º, CF/88"]),
        ("art. 5º da Constituição Federal de 1988", ["Art. 5º, CF/88"]),
        ("art. 5º da constituição", ["Art. 5º, CF/88"]),
        # Ordinal marks, and ordinals up to 9 only.
        ("art. 1o da CLT", ["Art. 1º, CLT"]),
        ("art. 1° da CLT", ["Art. 1º, CLT"]),
        ("art. 1 da CLT", ["Art. 1º, CLT"]),
        ("Art. 5.º da CF", ["Art. 5º, CF/88"]),
        ("art. 10º do CPC", ["Art. 10, CPC"]),
        ("§ 10 do art. 37 da CF", ["Art. 37, § 10, CF/88"]),
        # Number marks and thousands separators in law numbers.
        ("Lei nº 8.666/93", ["Lei 8.666/1993"]),
        ("Lei n° 8.666/93", ["Lei 8.666/1993"]),
        ("Lei n.º 8.666/93", ["Lei 8.666/1993"]),
        ("Lei Federal nº 8.666/93", ["Lei 8.666/1993"]),
        ("Lei 8666/93", ["Lei 8.666/1993"]),
        ("LEI 8.666/93", ["Lei 8.666/1993"]),
        # Case of the article word.
        ("ART. 5º DA CF", ["Art. 5º, CF/88"]),
        ("Artigo 5º da CF", ["Art. 5º, CF/88"]),
        ("NCPC, art. 2º", ["Art. 2º, CPC"]),
    ],
)
def test_normalisation(text, expected):
    assert extract_citations(text) == expected


CANONICAL = [
    "Art. 6º, XXII, Lei 14.133/2021",
    "Art. 74, § 1º, CF/88",
    "Art. 102, I, a, CF/88",
    "Art. 927, parágrafo único, CC",
    "Art. 1.228, CC",
    "Art. 121-A, CP",
    "Art. 475-J, CPC/1973",
    "Lei 8.112/1990",
    "Lei 8.112",
    "LC 101/2000",
    "Decreto-Lei 3.365/1941",
    "EC 45/2004",
    "Súmula 473 STF",
    "Súmula 331, IV, TST",
    "Súmula Vinculante 13",
]


@pytest.mark.parametrize("citation", CANONICAL)
def test_canonical_forms_parse_to_themselves(citation):
    assert extract_citations(citation) == [citation]


def test_the_release_spelling_of_expected_citations_normalises():
    # The seed's example of `key_citations_expected`, entry by entry.
    listed = ["Art. 5, inciso LXIX, CF/88", "Art. 1, Lei 12.016/2009"]
    normalised = [c for entry in listed for c in extract_citations(entry)]
    assert normalised == ["Art. 5º, LXIX, CF/88", "Art. 1º, Lei 12.016/2009"]


def test_a_law_inside_an_article_citation_is_not_counted_again():
    text = "Art. 6º, inciso XXII, da Lei nº 14.133/21."
    assert extract_citations(text) == ["Art. 6º, XXII, Lei 14.133/2021"]


def test_a_law_cited_again_on_its_own_is_counted():
    text = "Art. 6º, inciso XXII, da Lei nº 14.133/21. A Lei 14.133/21 revogou a Lei 8.666/93."
    assert extract_citations(text) == [
        "Art. 6º, XXII, Lei 14.133/2021",
        "Lei 14.133/2021",
        "Lei 8.666/1993",
    ]


def test_repeats_and_two_spellings_count_once():
    text = (
        "Súmula 473 do STF. Súmula nº 473 do Supremo Tribunal Federal. "
        "Art. 5º, inciso LXIX, da CF/88 e artigo 5, LXIX, da Constituição Federal."
    )
    assert extract_citations(text) == ["Súmula 473 STF", "Art. 5º, LXIX, CF/88"]


def test_caput_is_the_article_itself():
    text = "O art. 37, caput, da CF/88 e o caput do art. 37 da Constituição; o art. 37 da CF."
    assert extract_citations(text) == ["Art. 37, CF/88"]


def test_a_restating_parenthesis_belongs_to_the_citation():
    text = "O art. 6º do CDC (Lei 8.078/90) trata dos direitos básicos."
    assert extract_citations(text) == ["Art. 6º, CDC"]


def test_a_law_without_year_takes_its_year_from_the_same_text():
    assert extract_citations("A Lei 8.112 e, depois, a Lei 8.112/90.") == ["Lei 8.112/1990"]
    assert extract_citations("Aplica-se a Lei nº 8.112.") == ["Lei 8.112"]


def test_order_of_first_appearance():
    text = "Súmula Vinculante 13; art. 37 da CF; Lei 8.429/92; Súmula Vinculante 13."
    assert extract_citations(text) == ["Súmula Vinculante 13", "Art. 37, CF/88", "Lei 8.429/1992"]


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_on_arbitrary_text(text):
    assert isinstance(extract_citations(text), list)


LEGAL_PIECES = st.sampled_from(
    [
        "art.", "Art", "arts.", "artigo", "§", "§§", "parágrafo", "único", "inciso", "alínea",
        "caput", "Lei", "nº", "n.", "/", ",", " e ", " do ", " da ", "c/c", "ambos", "(", ")",
        "CF", "CF/88", "CPC", "CC", "CLT", "Súmula", "Vinculante", "SV", "STF", "TST", "I",
        "IV", "XXII", "a", "1", "5º", "12", "1.228", "-A", "90", "2021", " ", "de", "LC", "EC",
    ]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(LEGAL_PIECES, max_size=40).map("".join))
def test_never_raises_on_citation_like_text(text):
    citations = extract_citations(text)
    assert len(citations) == len(set(citations))


def test_citation_scores_both_empty():
    assert citation_scores([], []) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}


@pytest.mark.parametrize(
    ("predicted", "expected"), [([], ["Art. 5º, CF/88"]), (["Art. 5º, CF/88"], [])]
)
def test_citation_scores_one_side_empty(predicted, expected):
    assert citation_scores(predicted, expected)["f1"] == 0.0


def test_citation_scores_partial_overlap():
    predicted = ["Art. 5º, LXIX, CF/88", "Art. 74, CF/88", "Lei 12.016/2009", "Lei 12.016/2009"]
    expected = ["Art. 5º, LXIX, CF/88", "Art. 1º, Lei 12.016/2009"]
    # Sets: 3 predicted, 2 expected, 1 shared -> P = 1/3, R = 1/2, F1 = 2PR/(P+R) = 0.4.
    scores = citation_scores(predicted, expected)
    assert scores["precision"] == pytest.approx(1 / 3)
    assert scores["recall"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx(0.4)


def test_citation_scores_exact_match_only():
    # Seed 5.2.1: "Art. 5, CF/88" is not "Art. 74, CF/88".
    assert citation_scores(["Art. 74, CF/88"], ["Art. 5º, CF/88"]) == {
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
