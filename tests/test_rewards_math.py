# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Tests of the ``math`` reward: real gold answers in model-style formats, wrong answers, and adversarial inputs."""

from __future__ import annotations

import multiprocessing
import re
import threading
import time
from fractions import Fraction

import pytest
from helpers import read_rows

from trl_srppo.rewards import get_reward_func
from trl_srppo.rewards import math as math_rewards
from trl_srppo.rewards.math import math_reward, normalize_for_match

TIMEOUT = 2.0  # seconds per answer in these tests
WORKERS = 2
SLACK = 4.0  # seconds for process start-up and scheduling on a busy 2-core machine

# math500 gold answers whose model-style rewrite (see `model_style`) math-verify 0.9 does not accept. Empty today;
# a math-verify upgrade that breaks a format shows up here by name.
KNOWN_MISSES: set[str] = set()


@pytest.fixture(scope="module", autouse=True)
def _math_settings():
    math_rewards.configure(timeout=TIMEOUT, num_workers=WORKERS)
    math_rewards.reset_stats()
    yield
    math_rewards.shutdown()


def _decimal_to_frac(gold: str) -> str:
    value = Fraction(gold)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _mixed_to_improper(match: re.Match) -> str:
    whole, num, den = (int(g) for g in match.groups())
    return f"{whole * den + num}/{den}"


# Rewrites of a gold answer into another way a model writes the same value; the first rule that applies is used.
STYLE_RULES = [
    (r"\d+", lambda m: "0" + m.group()),  # 25 -> 025
    (r"-\d+", lambda m: m.group() + ".0"),  # -1 -> -1.0
    (r"-?\d*\.\d+", lambda m: _decimal_to_frac(m.group())),  # 0.15 -> \frac{3}{20}
    (r"(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}", _mixed_to_improper),  # 1\frac{4}{5} -> 9/5
    (r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}", lambda m: f"{m[1]}{m[2]}/{m[3]}"),  # \frac{3}{4} -> 3/4
    (r"(-?)\\[dt]?frac\s*(\d)(\d)", lambda m: f"{m[1]}\\dfrac{{{m[2]}}}{{{m[3]}}}"),  # \frac43 -> \dfrac{4}{3}
    (r"\\text\{([A-Za-z]+)\}", lambda m: m[1]),  # \text{Evelyn} -> Evelyn
    (r"\\text\{\(([A-E])\)\}", lambda m: m[1]),  # \text{(C)} -> C
    (r"(\d+)\^\\circ", lambda m: m[1] + " degrees"),  # 90^\circ -> 90 degrees
    (r"\\\$(.*)", lambda m: m[1]),  # \$18.90 -> 18.90
    (r"(\d+)_(\d)", lambda m: f"{m[1]}_{{{m[2]}}}"),  # 52_8 -> 52_{8}
    (r"(-?\d+)\s*([+-])\s*(\d+)i", lambda m: f"{m[2]}{m[3]}i + {m[1]}"),  # 6 - 5i -> -5i + 6
]
SUBSTITUTIONS = [
    (r"\\[dt]?frac\{([^{}]+)\}\{([^{}]+)\}", r"(\1)/(\2)"),  # \frac{11+9a}{20} -> (11+9a)/(20)
    (r"(\d)\s*\\(pi|sqrt)", r"\1 \\cdot \\\2"),  # 7\pi -> 7 \cdot \pi
    (r"\\sqrt(\d)", r"\\sqrt{\1}"),  # \sqrt2 -> \sqrt{2}
    (r"\\left|\\right", ""),
    (r",\\!\s*", ""),  # 10,\!080 -> 10080
    (r"(\d)([a-hj-z])\b", r"\1\\cdot \2"),  # 2k -> 2\cdot k
]


def model_style(gold: str) -> str:
    """Rewrite a gold answer the way a model might write the same value differently."""
    for pattern, rewrite in STYLE_RULES:
        match = re.fullmatch(pattern, gold)
        if match:
            return rewrite(match)
    for pattern, replacement in SUBSTITUTIONS:
        styled = re.sub(pattern, replacement, gold)
        if styled != gold:
            return styled
    return gold.replace(",", ", ") if "," in gold else gold.replace(" ", "")


def wrap(answer: str) -> str:
    return f"Working through the problem step by step gives the value, so the answer is $\\boxed{{{answer}}}$."


def test_registered_and_named():
    assert get_reward_func("math") is math_reward
    assert math_reward.__name__ == "math"


def test_math500_model_style_gold_scores_one(problem_sets):
    rows = read_rows(problem_sets / "math500.jsonl")  # every subject and answer type
    golds = [row["answer"] for row in rows]
    styled = [model_style(gold) for gold in golds]
    math_rewards.reset_stats()
    assert sum(s != g for s, g in zip(styled, golds)) > 0.9 * len(golds)
    start = time.monotonic()
    rewards = math_reward(None, [wrap(s) for s in styled], answer=golds)
    elapsed = time.monotonic() - start
    stats = math_rewards.stats()
    misses = {gold for gold, reward in zip(golds, rewards) if reward != 1.0}
    assert misses <= KNOWN_MISSES, f"newly failing formats: {misses - KNOWN_MISSES}"
    assert sum(r == 1.0 for r in rewards) / len(rewards) >= 0.98
    assert elapsed < 30
    # Most non-integer rewrites differ from the gold beyond formatting, so math-verify (not the fast path) decides.
    non_integer = sum(not re.fullmatch(r"-?\d+", gold) for gold in golds)
    assert stats.verified >= 0.8 * non_integer, (stats, non_integer)


FORMATS = [
    ("\\frac{3}{4}", "3/4"),
    ("\\frac{3}{4}", "\\dfrac{3}{4}"),
    ("\\dfrac{17}{50}", "0.34"),
    ("\\frac{\\sqrt{3}}{3}", "\\frac{1}{\\sqrt{3}}"),
    ("3\\sqrt{13}", "\\sqrt{117}"),
    ("11\\sqrt2", "11 \\sqrt{2}"),
    ("(3,4]", "(3, 4]"),
    ("(-\\infty, 0]", "(-\\infty,0]"),
    ("x \\in [-2,7]", "[-2, 7]"),
    ("(0,9) \\cup (9,36)", "(0, 9) \\cup (9, 36)"),
    ("\\text{Evelyn}", "\\text{Evelyn}"),
    ("\\text{east}", "\\text{East}"),
    ("\\text{(C)}", "(C)"),
    ("25", "025"),
    ("25", "25.0"),
    ("90^\\circ", "90"),
    ("90^\\circ", "90^{\\circ}"),
    ("90^\\circ", "90 degrees"),
    ("5.4 \\text{ cents}", "5.4"),
    ("15\\mbox{ cm}^2", "15"),
    ("\\$32,\\!348", "32348"),
    ("10,\\!080", "10{,}080"),
    ("1 \\pm \\sqrt{19}", "1 \\pm \\sqrt{19}"),
    ("\\{1\\pm\\sqrt{5},-2\\}", "-2, 1+\\sqrt{5}, 1-\\sqrt{5}"),
    ("3, 5, 7", "7, 5, 3"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)"),
    ("\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}", "\\begin{pmatrix} -\\frac13 \\\\ \\frac23 \\end{pmatrix}"),
    ("x^3+3x-6", "x^3 + 3x - 6"),
    ("y = 2x + 3", "2x+3"),
    ("137 \\frac{1}{2}", "137.5"),
    ("6 - 5i", "-5i + 6"),
]


def test_equivalent_formats_score_one():
    golds = [gold for gold, _ in FORMATS]
    rewards = math_reward(None, [wrap(pred) for _, pred in FORMATS], answer=golds)
    assert [pair for pair, reward in zip(FORMATS, rewards) if reward != 1.0] == []


def test_fbox_conversational_and_last_box():
    completions = [
        "\\fbox{42}",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "so \\boxed{\\frac{1}{2}}"}],
        "First I thought \\boxed{7} but in the end \\boxed{42}.",
        "First I thought \\boxed{42} but in the end \\boxed{7}.",
        "The answer is 42.",  # no box: 0.0
        "\\boxed{42",  # unbalanced: 0.0
        "\\boxed{}",
    ]
    answers = ["42", "0.5", "42", "42", "42", "42", "42"]
    assert math_reward(None, completions, answer=answers) == [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_degree_marks_after_long_whitespace_runs():
    # Degenerate text: a long run of spaces after "^". Each run is read once (a pattern with two adjacent \s* took
    # quadratic time), and a degree mark after the run is still removed.
    spaces = " " * 50_000
    assert normalize_for_match("90^" + spaces + "{" + spaces + "\\circ}") == "90"
    assert normalize_for_match("90^" + spaces + "x") == "90^x"


def _value_key(answer: str) -> str:
    # "x=5" states the value 5, which math-verify rightly accepts for a gold "5": such pairs are not wrong answers.
    return normalize_for_match(re.sub(r"^[a-z]\s*=", "", answer))


def test_wrong_answers_score_zero(problem_sets):
    golds = [row["answer"] for row in read_rows(problem_sets / "math500.jsonl")]
    others = golds[1:] + golds[:1]  # the next problem's answer
    pairs = [(g, o) for g, o in zip(golds, others) if _value_key(g) != _value_key(o)]
    assert len(pairs) > 0.9 * len(golds)
    rewards = math_reward(None, [wrap(model_style(o)) for _, o in pairs], answer=[g for g, _ in pairs])
    assert [pair for pair, reward in zip(pairs, rewards) if reward != 0.0] == []


def test_integer_answers_off_by_one_and_padding(problem_sets):
    aime = read_rows(problem_sets / "aime24.jsonl") + read_rows(problem_sets / "aime25.jsonl")
    rows = aime + read_rows(problem_sets / "deepscaler_aime_1983_2023.jsonl")[::10]
    golds = [str(row["answer"]) for row in rows]
    assert all(g.isdigit() for g in golds)
    padded = math_reward(None, [wrap(g.zfill(3)) for g in golds], answer=golds)
    plus_one = math_reward(None, [wrap(str(int(g) + 1)) for g in golds], answer=golds)
    assert padded == [1.0] * len(golds)
    assert plus_one == [0.0] * len(golds)


def test_hmmt_answers_score_one(problem_sets):
    rows = read_rows(problem_sets / "hmmt25_feb.jsonl")
    golds = [row["answer"] for row in rows]
    assert math_reward(None, [wrap(g) for g in golds], answer=golds) == [1.0] * len(golds)
    assert math_reward(None, [wrap(model_style(g)) for g in golds], answer=golds) == [1.0] * len(golds)


def test_unparsable_or_missing_gold_gives_none():
    completions = [wrap("5"), "no boxed answer", wrap("5"), wrap("5"), wrap("}{")]
    answers = ["}{", "}{", "", None, "5"]
    assert math_reward(None, completions, answer=answers) == [None, None, None, None, 0.0]


def test_missing_answer_column_is_a_clear_error():
    with pytest.raises(ValueError, match="answer"):
        math_reward(None, [wrap("1")], solution=["1"])


ADVERSARIAL = {
    "power tower": "\\boxed{9^{9^{9^{9}}}}",
    "factorial tower": "\\boxed{(10^{10^{10}})!}",
    "nested frac": "\\boxed{" + "\\frac{1}{" * 10_000 + "2" + "}" * 10_000 + "}",
    "long answer": "\\boxed{" + "1+" * 50_000 + "1}",
    "long text": "x" * 100_000,
    "unbalanced box": "\\boxed{" + "{" * 1000 + "1" * 100_000,
}
SLOW = ("power tower", "factorial tower")  # short enough to reach math-verify, which then never finishes


def _bound(n_slow: int) -> float:
    rounds = -(-n_slow // WORKERS)
    return rounds * TIMEOUT + SLACK


def _warm() -> None:
    math_rewards.warm_up()  # start the workers so that the timed calls measure answer checking only
    assert math_reward(None, [wrap("\\frac{1}{2}")], answer=["0.5"]) == [1.0]


def test_adversarial_inputs_are_bounded_and_counted():
    _warm()
    before = math_rewards.timeout_count()
    logged = []
    start = time.monotonic()
    rewards = math_reward(
        None,
        list(ADVERSARIAL.values()),
        answer=["5"] * len(ADVERSARIAL),
        log_metric=lambda name, value: logged.append((name, value)),
    )
    elapsed = time.monotonic() - start
    assert rewards == [0.0] * len(ADVERSARIAL)
    assert elapsed < _bound(len(SLOW)), elapsed
    assert math_rewards.timeout_count() - before == len(SLOW)
    assert logged == [("rewards/math/timeouts", float(len(SLOW)))]
    # The pool recovers: a normal answer right after still scores.
    assert math_reward(None, [wrap("\\frac{1}{2}")], answer=["0.5"]) == [1.0]


def test_time_bound_holds_off_the_main_thread():
    _warm()
    before = math_rewards.timeout_count()
    out = {}

    def work():
        out["rewards"] = math_reward(None, [ADVERSARIAL["power tower"], wrap("3/4")], answer=["5", "0.75"])

    start = time.monotonic()
    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=_bound(1) + 30)
    elapsed = time.monotonic() - start
    assert not thread.is_alive()
    assert out["rewards"] == [0.0, 1.0]
    assert elapsed < _bound(1), elapsed
    assert math_rewards.timeout_count() - before == 1


def _child(queue) -> None:
    start = time.monotonic()
    rewards = math_reward(None, [ADVERSARIAL["power tower"], wrap("3/4")], answer=["5", "0.75"])
    queue.put((rewards, time.monotonic() - start))
    math_rewards.shutdown()


def test_time_bound_holds_in_a_forked_worker_process():
    _warm()  # the parent's pool exists; the child must not use its pipes
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue,))
    process.start()
    rewards, elapsed = queue.get(timeout=_bound(1) + 60)
    process.join(timeout=30)
    assert process.exitcode == 0
    assert rewards == [0.0, 1.0]
    assert elapsed < _bound(1) + TIMEOUT, elapsed  # the child also starts its own workers
    assert math_reward(None, [wrap("7")], answer=["7"]) == [1.0]  # the parent's pool is intact


def test_stats_and_configure():
    math_rewards.reset_stats()
    math_reward(None, [wrap("1"), "none", wrap("\\frac{1}{2}")], answer=["1", "1", "0.5"])
    stats = math_rewards.stats()
    assert stats.completions == 3
    assert stats.fast_path == 1 and stats.no_answer == 1 and stats.verified == 1
    assert stats.timeouts == math_rewards.timeout_count() == 0
    with pytest.raises(ValueError):
        math_rewards.configure(timeout=0)
    math_rewards.configure(timeout=TIMEOUT, num_workers=WORKERS)
