"""The tiny model's tokenizer corpus (`Env.text_corpus`) holds no test task: a test prompt would
shape the model it evaluates, and a test split of another size would build another tokenizer,
whose reordered token ids start the same model file from other embeddings (issue 31)."""

from lexrl.envs.argument.env import ArgumentEnv, render_cases
from lexrl.envs.argument.options import ArgumentEnvConfig
from lexrl.envs.debate.env import DebateEnv
from lexrl.envs.debate.options import DebateEnvConfig
from lexrl.envs.gdpr.env import GdprEnv
from lexrl.envs.gdpr.options import GdprEnvConfig
from lexrl.envs.lexam.env import LexamEnv
from lexrl.envs.lexam.options import LexamEnvConfig


def test_the_argument_corpus_does_not_change_with_the_test_split():
    small = ArgumentEnv(ArgumentEnvConfig(train_per_kind=20, test_per_kind=6))
    large = ArgumentEnv(ArgumentEnvConfig(train_per_kind=20, test_per_kind=90))
    assert small.text_corpus() == large.text_corpus()
    corpus = set(large.text_corpus())
    options = large.config.factor_names, large.config.factor_layout
    test_cases = {render_cases(task.inputs, *options) for task in large.tasks("test")}
    train_cases = {render_cases(task.inputs, *options) for task in large.tasks("train")}
    assert test_cases - train_cases, "the test split should hold triples the training split lacks"
    assert not (test_cases - train_cases) & corpus


def test_question_envs_keep_their_test_questions_out_of_the_corpus():
    for env in (LexamEnv(LexamEnvConfig()), GdprEnv(GdprEnvConfig()), DebateEnv(DebateEnvConfig())):
        corpus = set(env.text_corpus())
        train = {env.question_text(task) for task in env.tasks("train")}
        test_only = {env.question_text(task) for task in env.tasks("test")} - train
        assert test_only, f"{type(env).__name__}: no test question differs from the training ones"
        assert train <= corpus
        assert not test_only & corpus, f"{type(env).__name__}: test questions in the corpus"
