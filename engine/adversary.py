"""The attacker model: scope x knowledge (ARCHITECTURE section 3).

- scope `cohort`: the attacker knows the target is in the released cohort; candidates are the
  released records themselves (k-anonymity; Heatherly's DEMO_D; UGACLIP's assumption iii).
- scope `population`: the attacker only knows the target is a patient of the institution;
  candidates are the population the cohort was drawn from (k-map; GCCens; Heatherly's DEMO_S).
- knowledge `single_visit`: the attacker knows the codes of one visit (Heatherly; PPE's
  single-visit filter); a record's distinguishability is the minimum over its visits.
- knowledge `all_visits`: the attacker knows all the target's codes (PPE's all-visits filter;
  GCCens with repeat counts; the LDA with (code, age) pairs).
- knowledge `whole_record` (issue 39): the attacker knows every code of the target's record AND which
  codes it does not hold (the flat-table model of ARX, sdcMicro and pycanon): a candidate is consistent
  only when its released item set equals the target's; the class is the set of records with the same
  item set. Repeat counts and the visit grouping are not part of it. No method of the papers targets
  this attacker (`PAPERS_KNOWLEDGES`): their releases are verified under it and refused when they fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from engine.study.parameters import Parameter

Scope = Literal["cohort", "population"]
Knowledge = Literal["single_visit", "all_visits", "whole_record"]
SCOPES: tuple[Scope, ...] = ("cohort", "population")
KNOWLEDGES: tuple[Knowledge, ...] = ("single_visit", "all_visits", "whole_record")
PAPERS_KNOWLEDGES: tuple[Knowledge, ...] = ("single_visit", "all_visits")  # a record matches if it holds them
# The largest k anywhere (the CLI, a study file, the app's sidebar): a group of a million records is
# beyond any cohort, and larger values overflow the compiled kernels' integers (issue 40: --k
# 99999999999999999999 crashed). One bound for every layer (issue 38): a study made with --k 150
# reopened with k = 2 when the sidebar stopped at 100.
MAX_K = 1_000_000
MIN_RELEASE_K = 2  # a release, a study and the app's k: k = 1 protects nobody (`risk --k` takes 1)


# The study-level parameters, declared once (engine.study.parameters): the sidebar's inputs, `study new`'s
# options and the study file's reader are made from them (issue 38).
K = Parameter("k", int, 5, bounds=(MIN_RELEASE_K, MAX_K), help="privacy parameter k (>= 2)")
SCOPE = Parameter("scope", str, "cohort", choices=SCOPES, help="the attacker's candidates")
KNOWLEDGE = Parameter("knowledge", str, "single_visit", choices=KNOWLEDGES, help="what the attacker knows")


def check_k(k: object, *, least: int = MIN_RELEASE_K) -> int:
    """`k` when it is a whole number from `least` to MAX_K (`K`), else a SettingsError (a UserError)
    naming it: a k that a layer cannot hold is refused, never changed (issue 38, finding 1)."""
    return int(K.between(least, MAX_K).check(k))


def k_argument(text: str) -> int:
    """An argparse `type` for `--k`: a whole number 1..MAX_K, else argparse's error (exit 2) naming it."""
    import argparse

    try:
        k = int(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"k must be a whole number, not {text!r}") from None
    try:
        return check_k(k, least=1)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("cohort", "single_visit"): (
        "Knows the target is in the shared cohort and knows the codes of one of their visits "
        "(k-anonymity on single visits; Heatherly's DEMO_D, Loukides' single-visit policy)."
    ),
    ("cohort", "all_visits"): (
        "Knows the target is in the shared cohort and knows every code in their record "
        "(k-anonymity on whole records; Loukides' all-visits policy, the LDA's trajectories)."
    ),
    ("population", "single_visit"): (
        "Knows only that the target is a patient of the institution, and the codes of one visit "
        "(k-map against the population; Heatherly's DEMO_S)."
    ),
    ("population", "all_visits"): (
        "Knows only that the target is a patient of the institution, and every code in their "
        "record, with repeats where released (k-map; Tamersoy's GCCens)."
    ),
    ("cohort", "whole_record"): (
        "Knows the target is in the shared cohort, every code in their record and which codes it does "
        "not hold: only records with exactly the same codes match (k-anonymity of a flat table: ARX, "
        "sdcMicro, pycanon; no method of the papers targets it)."
    ),
    ("population", "whole_record"): (
        "Knows only that the target is a patient of the institution, every code in their record and "
        "which codes it does not hold: only patients with exactly the same released codes match "
        "(k-map of a flat table; no method of the papers targets it)."
    ),
}
WHOLE_RECORD_NOTE = (
    "no method of the papers targets the whole-record attacker (it also knows which codes a record "
    "does not hold); their releases are verified under it, and refused when they fail"
)


@dataclass(frozen=True)
class Adversary:
    """What the attacker is assumed to know: `scope` and `knowledge` (see module docstring)."""

    scope: Scope = "cohort"
    knowledge: Knowledge = "single_visit"

    def __post_init__(self) -> None:
        SCOPE.check(self.scope)  # a SettingsError, a ValueError too
        KNOWLEDGE.check(self.knowledge)

    @property
    def label(self) -> str:
        return f"{self.scope} / {self.knowledge.replace('_', ' ')}"

    def describe(self) -> str:
        """One plain-language line: who the attacker is, what they know, which paper uses it."""
        return _DESCRIPTIONS[(self.scope, self.knowledge)]

    @property
    def targeted_by_papers(self) -> bool:
        """Whether the papers' methods aim at this attacker (not the whole-record one, issue 39)."""
        return self.knowledge in PAPERS_KNOWLEDGES


def papers_knowledge(knowledge: Knowledge) -> Knowledge:
    """The knowledge a method of the papers is run for under this one: itself, or all visits for the
    whole-record attacker (the nearest the papers target; the release is then verified under the whole
    record, `WHOLE_RECORD_NOTE`)."""
    return "all_visits" if knowledge == "whole_record" else knowledge


ALL_ADVERSARIES: tuple[Adversary, ...] = tuple(Adversary(s, k) for s in SCOPES for k in PAPERS_KNOWLEDGES)
"""The papers' four adversaries (the Risk page's and the report's "all four")."""
WHOLE_RECORD_ADVERSARIES: tuple[Adversary, ...] = tuple(Adversary(s, "whole_record") for s in SCOPES)
EVERY_ADVERSARY: tuple[Adversary, ...] = ALL_ADVERSARIES + WHOLE_RECORD_ADVERSARIES
