# Copyright 2026 The trl-srppo authors. Licensed under the Apache License, Version 2.0.
"""Training data: real rows become prompts, malformed rows are skipped and counted (or stop training), and the chat
template switches reach the template."""

import json
import re

import pytest
import torch
from conftest import cpu_config
from datasets import Dataset

from trl_srppo import SRPPOTrainer
from trl_srppo.tasks.data import build_prompts, field_columns, load_source, prepare_rows, read_fields
from trl_srppo.tasks.registry import get_task


def test_math_rows_from_a_local_file_become_conversational_prompts(problem_sets):
    source = load_source(str(problem_sets / "deepscaler_aime_1983_2023.jsonl"))
    count = min(20, len(source))
    dataset, bad = build_prompts(source.select(range(count)), get_task("math"), system_prompt="Be brief.")
    assert count >= 10 and len(dataset) == count and len(bad) == 0
    assert set(dataset.column_names) == {"prompt", "answer"}
    prompt = dataset[0]["prompt"]
    assert prompt[0] == {"role": "system", "content": "Be brief."}
    assert prompt[1]["role"] == "user" and source[0]["problem"] in prompt[1]["content"]
    assert "\\boxed{}" in prompt[1]["content"]


def test_countdown_and_knights_knaves_rows_load(problem_sets):
    countdown, bad = build_prompts(
        load_source(str(problem_sets / "countdown_test.jsonl")).select(range(5)), get_task("countdown")
    )
    assert len(countdown) == 5 and not bad and isinstance(countdown[0]["nums"], list)
    assert str(countdown[0]["target"]) in countdown[0]["prompt"][0]["content"]
    kk, bad = build_prompts(
        load_source(str(problem_sets / "knights_knaves_test.jsonl")).select(range(5)), get_task("knights_knaves")
    )
    assert len(kk) == 5 and not bad and kk[0]["solution"] and kk[0]["names"]


BROKEN_MATH = [
    {"problem": "What is 1 + 1?", "answer": "2"},
    {"problem": "", "answer": "3"},  # empty problem
    {"problem": "Compute 2 + 2.", "answer": None},  # missing answer
    {"problem": "Simplify x.", "answer": "\\frac{"},  # gold answer that does not parse
    {"problem": "What is 10/4?", "answer": "\\frac{5}{2}"},
]


def test_malformed_rows_are_skipped_and_counted_with_their_index():
    dataset, bad = build_prompts(Dataset.from_list(BROKEN_MATH), get_task("math"))
    assert [row["answer"] for row in dataset] == ["2", "\\frac{5}{2}"]
    assert [index for index, _ in bad.rows] == [1, 2, 3]
    reasons = dict(bad.rows)
    assert "problem" in reasons[1] and "answer" in reasons[2] and "does not parse" in reasons[3]
    assert "3 malformed row(s)" in bad.summary()


def test_max_rows_keeps_the_first_usable_rows_and_reads_no_further():
    # Rows 1-3 are malformed; the first 2 usable rows are 0 and 4. Row 5 (malformed) comes after them: not reported.
    rows = [*BROKEN_MATH, {"problem": "", "answer": "1"}, {"problem": "What is 3 + 3?", "answer": "6"}]
    dataset, bad = build_prompts(Dataset.from_list(rows), get_task("math"), max_rows=2)
    assert [row["answer"] for row in dataset] == ["2", "\\frac{5}{2}"]
    assert [index for index, _ in bad.rows] == [1, 2, 3]
    dataset, bad = build_prompts(Dataset.from_list(rows), get_task("math"), max_rows=3)
    assert [row["answer"] for row in dataset] == ["2", "\\frac{5}{2}", "6"] and len(bad) == 4
    with pytest.raises(ValueError, match="max_rows"):
        build_prompts(Dataset.from_list(rows), get_task("math"), max_rows=0)


def test_chain_task_rows_are_checked():
    rows = [
        {"chain": "7 max 5 min 3 =", "answer": "7 3"},
        {"chain": "7 max 5 min 3 =", "answer": "7 5"},  # a wrong running value
        {"chain": "7 plus 5 =", "answer": "2"},  # an unknown operator
        {"chain": "7 max 5", "answer": "7"},  # no "="
    ]
    dataset, bad = build_prompts(Dataset.from_list(rows), get_task("chain"))
    assert [row["prompt"] for row in dataset] == [[{"role": "user", "content": "7 max 5 min 3 ="}]]
    assert [row["answer"] for row in dataset] == ["7 3"]
    reasons = dict(bad.rows)
    assert list(reasons) == [1, 2, 3] and "running values '7 3'" in reasons[1]
    assert "unknown operator 'plus'" in reasons[2] and "not a chain prompt" in reasons[3]


def test_malformed_rows_stop_training_when_asked():
    with pytest.raises(ValueError, match=r"row 1: .*row 2: .*row 3: .*on_bad_row='skip'"):
        build_prompts(Dataset.from_list(BROKEN_MATH), get_task("math"), on_bad_row="error")


def test_column_map_and_missing_columns():
    renamed = Dataset.from_list([{"question": "What is 3 - 1?", "final": "2"}])
    dataset, _ = build_prompts(renamed, get_task("math"), column_map={"problem": "question", "answer": "final"})
    assert dataset[0]["answer"] == "2"
    with pytest.raises(ValueError, match="dataset_column_map"):
        build_prompts(renamed, get_task("math"))


def test_a_wrong_column_map_names_what_it_got_wrong():
    renamed = Dataset.from_list([{"question": "What is 3 - 1?", "final": "2", "problem": "What is 1 + 1?"}])
    # A field name with a typo: without the check, `problem` would be read from its own column, silently.
    with pytest.raises(ValueError, match=r"maps \['answr', 'problme'\], which the math task has no field for: its "):
        build_prompts(renamed, get_task("math"), column_map={"problme": "question", "answr": "final"})
    # A field mapped to a column the data does not have.
    with pytest.raises(ValueError, match=r"The column map sends 'answer' -> answer_text, which the dataset lacks"):
        build_prompts(renamed, get_task("math"), column_map={"problem": "question", "answer": "answer_text"})
    with pytest.raises(ValueError, match=r"field\(s\) \['answer'\] \(columns: .*\)\. Map them") as error:
        build_prompts(renamed, get_task("math"), column_map={"problem": "question"})
    assert "column map sends" not in str(error.value)  # `answer` was not mapped: no note about the map


def test_each_field_is_read_from_its_first_present_column_holding_a_value():
    math = get_task("math")
    columns = {"problem": ["question", "problem", "prompt"]}  # `answer` is read from its own column
    assert field_columns(math, columns, None) == {"problem": ("question", "problem", "prompt"), "answer": ("answer",)}
    present = field_columns(math, columns, ["prompt", "answer", "problem"])
    assert present == {"problem": ("problem", "prompt"), "answer": ("answer",)}  # in the map's order of preference
    assert read_fields({"problem": None, "prompt": "2 + 2?", "answer": "4"}, present) == {
        "problem": "2 + 2?",
        "answer": "4",
    }
    assert read_fields({"problem": None}, present) == {"problem": None, "answer": None}
    with pytest.raises(ValueError, match=r"field\(s\) \['answer'\] \(columns: \['prompt'\]\)\. Map them!"):
        field_columns(math, columns, ["prompt"], "Map them!")


def test_malformed_countdown_and_knights_knaves_rows():
    countdown = Dataset.from_list(
        [{"nums": [1, 2], "target": 3}, {"nums": None, "target": 3}, {"nums": [4], "target": 4}]
    )
    _, bad = build_prompts(countdown, get_task("countdown"))
    assert [i for i, _ in bad.rows] == [1, 2]
    kk = Dataset.from_list(
        [
            {"quiz": "q", "names": ["A", "B"], "solution": [True, False]},
            {"quiz": "q", "names": ["A", "B"], "solution": [True]},
        ]
    )
    _, bad = build_prompts(kk, get_task("knights_knaves"))
    assert [i for i, _ in bad.rows] == [1]


def test_wrongly_typed_countdown_rows_from_a_file_are_skipped_not_coerced(tmp_path):
    # A fraction is not truncated to an integer; integral floats (an integer column with a missing value is read as
    # floats) are the integers they hold.
    path = tmp_path / "countdown.jsonl"
    rows = [
        {"nums": [3.7, 5, 2], "target": 13},  # a fractional number
        {"nums": [3, 5, 7], "target": 15.9},  # a fractional target
        {"nums": [1.0, 2.0], "target": 3.0},  # integral floats: kept as integers
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    dataset, bad = build_prompts(load_source(str(path)), get_task("countdown"))
    assert dataset["nums"] == [[1, 2]] and dataset["target"] == [3]
    assert "[1, 2]" in dataset[0]["prompt"][0]["content"] and "equals 3." in dataset[0]["prompt"][0]["content"]
    reasons = dict(bad.rows)
    assert list(reasons) == [0, 1]
    assert "field 'nums' must hold integers only, got float 3.7" in reasons[0]
    assert "field 'target' must be an integer, got float 15.9" in reasons[1]


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"nums": "357", "target": 15}, "field 'nums' must be a list of integers, got str '357'"),
        ({"nums": [True, 5, 7], "target": 13}, "field 'nums' must hold integers only, got bool True in [True, 5, 7]"),
        ({"nums": ["3", "5"], "target": 8}, "field 'nums' must hold integers only, got str '3' in ['3', '5']"),
        ({"nums": [3, 5], "target": "8"}, "field 'target' must be an integer, got str '8'"),
        ({"nums": [3, 5], "target": False}, "field 'target' must be an integer, got bool False"),
    ],
)
def test_countdown_rows_of_the_wrong_type_are_malformed(row, reason):
    rows = [{"nums": [1, 2], "target": 3}, row]
    with pytest.raises(
        ValueError, match=r"1 malformed row\(s\): row 1: " + re.escape(reason) + r".*on_bad_row='skip'"
    ):
        prepare_rows(rows, get_task("countdown"), on_bad_row="error")
    usable, bad = prepare_rows(rows, get_task("countdown"))
    assert [r.fields["nums"] for r in usable] == [[1, 2]] and bad.rows == [(1, reason)]


def test_math_rows_need_text_problems_and_text_or_whole_number_answers(tmp_path):
    rows = [
        {"problem": ["What", "is"], "answer": "2"},  # a list is not a problem text
        {"problem": "What is 1 + 1?", "answer": True},  # booleans are not answers
        {"problem": "What is 1 + 1?", "answer": ["2"]},
        {"problem": "What is 1 / 3?", "answer": 0.3333333333333333},  # an approximation of 1/3
        {"problem": "What is 1 + 1?", "answer": 2},  # AIME-style integer answers become text
        {"problem": "What is 2 + 2?", "answer": 4.0},
        {"problem": "What is 3 + 3?", "answer": " 6 "},
    ]
    usable, bad = prepare_rows(rows, get_task("math"))
    assert [row.fields["answer"] for row in usable] == ["2", "4", "6"]
    reasons = dict(bad.rows)
    assert reasons == {
        0: "field 'problem' must be text (a string), got list ['What', 'is']",
        1: "field 'answer' must be text or a whole number, got bool True",
        2: "field 'answer' must be text or a whole number, got list ['2']",
        3: "field 'answer' must be text or a whole number, got float 0.3333333333333333; give a fractional answer "
        'as text (e.g. "1/3" or "0.5")',
    }
    # A local file: the list-valued problem is reported, not turned into the prompt text "['What', 'is']".
    path = tmp_path / "math.jsonl"
    path.write_text(json.dumps({"problem": ["What", "is"], "answer": "2"}) + "\n")
    with pytest.raises(ValueError, match=r"row 0: field 'problem' must be text \(a string\), got list"):
        build_prompts(load_source(str(path)), get_task("math"), on_bad_row="error")


def test_text_fields_of_the_other_tasks_must_be_strings():
    kk = {"quiz": "q", "names": ["A", "B"], "solution": [True, False]}
    _, bad = prepare_rows([kk, {**kk, "quiz": 7}, {**kk, "names": ["A", 2]}], get_task("knights_knaves"))
    assert bad.rows == [
        (1, "field 'quiz' must be text (a string), got int 7"),
        (2, "field 'names' must hold one non-empty name (a string) per person, got ['A', 2]"),
    ]
    chain = {"chain": "7 max 5 =", "answer": "7"}
    _, bad = prepare_rows([chain, {**chain, "answer": 7}], get_task("chain"))
    assert bad.rows == [(1, "field 'answer' must be text (a string), got int 7")]
    options = {"question": "Q?", "correct": "a", "incorrect_1": "b", "incorrect_2": "c", "incorrect_3": "d"}
    _, bad = prepare_rows(
        [options, {**options, "incorrect_2": None}, {**options, "correct": True}], get_task("multiple_choice")
    )
    assert bad.rows == [
        (1, "field 'incorrect_2' is missing or empty"),
        (2, "field 'correct' must be text (a string), got bool True"),
    ]


def test_missing_local_file_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_source(str(tmp_path / "nope.jsonl"))


def test_chat_template_kwargs_reach_the_template(toy, tmp_path):
    tokenizer, build_model, _ = toy
    # A template that ends the prompt with the digit 9 when thinking is on and 0 when it is off.
    tokenizer.chat_template = (
        "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if enable_thinking %} 9{% else %} 0{% endif %}"
    )
    dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": "1 2 3"}], "answer": "3"}] * 8)
    for thinking, marker in ((True, "9"), (False, "0")):
        args = cpu_config(tmp_path, chat_template_kwargs={"enable_thinking": thinking})
        trainer = SRPPOTrainer(
            model=build_model(),
            reward_funcs=lambda completions, **kw: [0.0] * len(completions),
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
        )
        trainer.create_optimizer_and_scheduler(num_training_steps=1)
        trainer.model.train()
        output = trainer._generate_and_score_completions([dataset[i] for i in range(8)])
        last_prompt_token = tokenizer.convert_ids_to_tokens(int(output["prompt_ids"][0, -1]))
        assert last_prompt_token == marker, (thinking, last_prompt_token)
        assert torch.all(output["prompt_mask"][:, -1] == 1)


def test_load_source_reads_every_json_layout_the_same(tmp_path):
    import json

    rows = [{"problem": "1+1?", "answer": "2"}, {"problem": "2+2?", "answer": "4"}]
    layouts = {
        "rows.jsonl": "".join(json.dumps(r) + "\n" for r in rows),
        "list.json": json.dumps(rows),
        "columns.json": json.dumps({"problem": ["1+1?", "2+2?"], "answer": ["2", "4"]}),
        "wrapped.json": json.dumps({"data": rows}),
    }
    for name, text in layouts.items():
        (tmp_path / name).write_text(text)
        assert load_source(str(tmp_path / name)).to_list() == rows, name
    (tmp_path / "ragged.json").write_text(json.dumps({"problem": ["a", "b"], "answer": ["1"]}))
    with pytest.raises(ValueError, match="different lengths"):
        load_source(str(tmp_path / "ragged.json"))
    (tmp_path / "rows.txt").write_text("x")
    with pytest.raises(ValueError, match="unsupported extension"):
        load_source(str(tmp_path / "rows.txt"))


def test_one_threshold_for_correct():
    from trl_srppo.tasks.registry import CORRECT_THRESHOLD, is_correct

    assert CORRECT_THRESHOLD == 1.0
    assert [is_correct(r) for r in (1.0, 1.1, 0.99, 0.5, 0.0, None, float("nan"))] == [
        True, True, False, False, False, False, False,
    ]  # fmt: skip


def test_evaluation_prepares_rows_like_training(tmp_path):
    # A benchmark is the training task plus a source: the rows training leaves out are left out of evaluation too.
    import json

    from trl_srppo.evaluation.benchmarks import Benchmark

    path = tmp_path / "broken.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in BROKEN_MATH))
    problems = Benchmark(name="broken", task="math", hub_path="none").load(source=path)
    trained, _ = build_prompts(load_source(str(path)), get_task("math"))
    assert [p.columns["answer"] for p in problems] == [row["answer"] for row in trained] == ["2", "\\frac{5}{2}"]
    assert [p.id for p in problems] == ["0", "4"]


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
@pytest.mark.parametrize("extension", [".jsonl", ".json"])
def test_an_empty_data_file_is_a_clear_error(tmp_path, content, extension):
    from trl_srppo.tasks.data import load_source

    path = tmp_path / f"rows{extension}"
    path.write_text(content)
    with pytest.raises(ValueError, match=rf"Dataset file {path} is empty \(no rows\)"):
        load_source(str(path))
