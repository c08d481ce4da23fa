"""Issue 38, "A method registry": every parameter declared once (`engine.study.parameters`), one validator.

A study file's settings are read through the same declarations as `validate` checks: a value out of
bounds, not among the choices, of the wrong type or under an unknown name is refused with one
message naming the file, the release, the method, the parameter and the value, never read as a
default or coerced.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from engine.adversary import KNOWLEDGE, MAX_K, SCOPE, K
from engine.study.package import read_study_file
from engine.study.parameters import Parameter, SettingsError, parameters_of
from engine.study.runs import (
    SETTINGS_TYPES,
    CodeSelection,
    GCCensSettings,
    HeatherlySettings,
    LabRecallSettings,
    LDASettings,
    ProfilesSettings,
    settings_to_dict,
)
from engine.study.study import StudyError
from tests.test_study_package import _study


def _with_release(settings: dict) -> bytes:
    base = json.loads(_study().to_json())
    release = {"name": "r1", "settings": settings, "data": base["data"], "files": {}, "verification": None}
    return json.dumps({**base, "releases": [release]}).encode()


@pytest.mark.parametrize(
    ("settings", "words"),
    [  # one per kind: a bound, a choice, a type, an unknown parameter
        (
            {**settings_to_dict(LDASettings()), "w_icd": 1.5},
            "release 'r1': LDA: w_icd must be a number from 0 to 1, not 1.5",
        ),
        (
            {**settings_to_dict(GCCensSettings()), "variant": "fast"},
            "release 'r1': GCCens: variant must be one of faithful, targeted, not 'fast'",
        ),
        (
            {**settings_to_dict(HeatherlySettings()), "complete": "yes"},
            "release 'r1': Heatherly: complete must be true or false, not 'yes'",
        ),
        (
            {**settings_to_dict(ProfilesSettings()), "max_supressed": 3},
            "release 'r1': Profiles: unknown parameter(s) 'max_supressed'; known: algorithm, k,",
        ),
    ],
    ids=["bound", "choice", "type", "unknown"],
)
def test_a_study_files_bad_setting_is_refused_naming_file_release_method_and_parameter(settings, words):
    with pytest.raises(StudyError, match=re.escape(f"s.json: {words}")):
        read_study_file(_with_release(settings), "s.json")


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"top_n": 0}, "LDA codes: top_n must be a whole number from 1 to 1,000,000,000, not 0"),
        ({"mode": "some"}, "LDA codes: mode must be one of paper, top, chosen, all, not 'some'"),
        ({"colour": "red"}, "LDA codes: unknown parameter(s) 'colour'"),
    ],
)
def test_a_nested_code_selection_is_read_through_its_declarations(change, words):
    settings = settings_to_dict(LDASettings())
    settings["codes"] = {**settings["codes"], **change}
    with pytest.raises(StudyError, match=re.escape(words)):
        read_study_file(_with_release(settings), "s.json")


def test_a_per_code_cap_is_checked_as_the_universal_cap_is():
    settings = {**settings_to_dict(GCCensSettings()), "caps": [["250", 2], ["401", -1]]}
    with pytest.raises(StudyError, match=re.escape("GCCens: the cap of 401 must be a whole number from 0")):
        read_study_file(_with_release(settings), "s.json")


def test_the_study_level_settings_are_read_through_their_declarations():
    base = json.loads(_study().to_json())
    for change, words in (
        ({"k": MAX_K + 1}, f"k must be a whole number from 2 to 1,000,000, not {MAX_K + 1}"),
        (
            {"adversary": {"scope": "ward", "knowledge": "all_visits"}},
            "scope must be one of cohort, population",
        ),
        ({"determination": {"context": "friends"}}, "release context must be one of public, controlled"),
    ):
        with pytest.raises(StudyError, match=re.escape(f"s.json: {words}")):
            read_study_file(json.dumps({**base, **change}).encode(), "s.json")


# ------------------------------------------------------------------------------ the declarations
@pytest.mark.parametrize(
    "cls", [*SETTINGS_TYPES.values(), CodeSelection, LabRecallSettings], ids=lambda c: c.__name__
)
def test_every_declared_parameter_is_a_field_whose_default_it_allows(cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for p in parameters_of(cls):
        assert fields[p.name].default == p.default
        assert p.check(p.default, cls.method) == p.default
    assert parameters_of(cls), cls.__name__


def test_every_method_declares_k_as_the_study_does():
    for cls in SETTINGS_TYPES.values():
        assert [p for p in parameters_of(cls) if p.name == "k"] == [K]
    assert (SCOPE.allowed, KNOWLEDGE.allowed) == (
        ("cohort", "population"),
        ("single_visit", "all_visits", "whole_record"),
    )


@pytest.mark.parametrize(
    ("parameter", "value", "words"),
    [
        (Parameter("n", int, 1, bounds=(1, 10)), 11, "m: n must be a whole number from 1 to 10, not 11"),
        (Parameter("n", int, 1, bounds=(1, 10)), 5.0, "m: n must be a whole number from 1 to 10, not 5.0"),
        (Parameter("n", int, 1, bounds=(1, 10)), True, "m: n must be a whole number from 1 to 10, not True"),
        (
            Parameter("w", float, 0.5, bounds=(0, 1)),
            float("nan"),
            "m: w must be a number from 0 to 1, not nan",
        ),
        (Parameter("c", str, "a", choices=("a", "")), "b", "m: c must be one of a, '' (none), not 'b'"),
        (Parameter("b", bool, True), 1, "m: b must be true or false, not 1"),
        (
            Parameter("o", int, None, bounds=(0, 9), optional=True),
            -1,
            "m: o must be a whole number from 0 to 9 or none",
        ),
    ],
)
def test_one_validator_phrases_every_refusal_the_same_way(parameter, value, words):
    with pytest.raises(SettingsError, match=re.escape(words)):
        parameter.check(value, "m")


def test_a_whole_number_is_taken_for_a_number_and_none_where_optional():
    assert Parameter("w", float, 0.5, bounds=(0, 1)).check(1, "m") == 1
    assert Parameter("o", int, None, bounds=(0, 9), optional=True).check(None, "m") is None


# --------------------------------------------------------------------- the command line's options
METHOD_COMMANDS = {
    "gccens": GCCensSettings,
    "generalize": HeatherlySettings,
    "lda": LDASettings,
    "ugaclip": ProfilesSettings,
    "aclip": ProfilesSettings,
}


def _leaf(parser, *path):
    import argparse

    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


@pytest.mark.parametrize("command", ["anonymize", "study add"])
@pytest.mark.parametrize("method", list(METHOD_COMMANDS))
def test_every_declared_flag_is_an_option_with_the_declared_choices_and_default(command, method):
    """`anonymize METHOD` and `study add METHOD` offer each declared parameter that has a flag, with
    its choices (none: the option left out) and default (a bool: a switch, off unless given)."""
    from engine.commands.cli import build_parser

    parser = _leaf(build_parser(), *command.split(), method)
    actions = {s: a for a in parser._actions for s in a.option_strings}
    for p in parameters_of(METHOD_COMMANDS[method]):
        if not p.option or p.name == "k":  # k: `k_argument`, the one range (test_k_layers)
            continue
        action = actions[p.option]
        if p.kind is bool:
            assert action.const is True and action.default is False, p.name
            continue
        if p.allowed is not None:
            assert list(action.choices) == [c for c in p.allowed if c != ""], p.name
        assert action.default == (None if p.default == "" or action.required else p.default), p.name


def test_labs_recall_offers_the_declared_run_settings():
    from engine.commands.cli import build_parser

    parser = _leaf(build_parser(), "labs", "recall")
    actions = {s: a for a in parser._actions for s in a.option_strings}
    for p in parameters_of(LabRecallSettings):
        assert actions[p.option].default == p.default, p.name
        assert p.allowed is None or list(actions[p.option].choices) == list(p.allowed), p.name


def test_study_new_takes_the_declared_scopes_and_knowledges():
    from engine.commands.cli import build_parser

    parser = _leaf(build_parser(), "study", "new")
    actions = {s: a for a in parser._actions for s in a.option_strings}
    assert list(actions["--scope"].choices) == list(SCOPE.allowed) and actions["--scope"].required
    assert list(actions["--knowledge"].choices) == list(KNOWLEDGE.allowed) and actions["--knowledge"].required


def test_a_nested_selection_is_named_with_its_method():
    with pytest.raises(SettingsError, match=re.escape("GCCens codes: top_n must be a whole number from 1")):
        GCCensSettings(codes=CodeSelection("top", 0)).validate()


@pytest.mark.parametrize(
    ("method", "option", "words"),
    [
        ("lda", ["--w-icd", "1.5"], "--w-icd must be a number from 0 to 1, not 1.5"),
        ("gccens", ["--top-codes", "0"], "--top-codes must be a whole number from 1 to 1,000,000,000, not 0"),
        (
            "aclip",
            ["--knowledge", "all_visits", "--max-suppressed", "-1"],
            "--max-suppressed must be a whole number from 0 to 1,000,000,000 or none, not -1",
        ),
    ],
)
def test_a_bad_option_is_refused_by_its_declaration_before_the_data_are_read(
    tmp_path, capsys, method, option, words
):
    """Issue 38: `anonymize` checked --w-icd, --top-codes and --max-suppressed by hand, each in its own
    words ("--w-icd must lie in [0, 1]", "--top-codes must be >= 1"); now by the declaration's rule,
    naming the option, and before any file is read (the events named here do not exist)."""
    from engine.commands.cli import main

    args = [
        "anonymize",
        method,
        "--events",
        str(tmp_path / "none.csv"),
        "--cohort",
        str(tmp_path / "none.txt"),
    ]
    args += ["--k", "5", *option, "--out", str(tmp_path / "o.csv"), "--codemap", str(tmp_path / "m.csv")]
    assert main(args) == 2
    assert words in capsys.readouterr().err


def test_the_declarations_of_a_settings_class_are_read_once(monkeypatch):
    """The GCCens view checks each code's cap through `code_cap` (12,081 codes of the paper-scale cohort,
    three times per run): every call read the class's fields and copied each declaration again (181,287
    `dataclasses.replace` for 36,247 caps, 1.3 s of a 3 s Run). The declarations are built once per class."""
    from engine.study import parameters as module
    from engine.study.runs import GCCensSettings, code_cap

    parameters_of(GCCensSettings)  # built here once, if not before
    copies = []
    real = dataclasses.replace
    monkeypatch.setattr(module.dataclasses, "replace", lambda *a, **kw: copies.append(1) or real(*a, **kw))
    for i in range(100):
        assert code_cap(f"C{i}").check(3, GCCensSettings.method) == 3
    assert parameters_of(GCCensSettings()) is parameters_of(GCCensSettings)
    assert len(copies) == 100  # one renamed copy per code, none of the class's declarations
