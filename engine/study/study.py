"""A study: what an officer hands to an IRB, as data (no Streamlit).

A study ties the data (content fingerprints of the events and of every group's id list, the input
files' sha256 and the load options that changed the data) to the attacker assumption (adversary, k)
and to the releases made from it. A release enters the study only by an explicit action
(`Study.add`); it is immutable and carries its method's typed settings (`engine.study.runs`), the data it
was made from, the sha256 of every file the export gate wrote and the risk engine's verdict at the time.

Pages and the report re-verify every release under the study's current adversary and k
(`reverify`, `verification_matrix`). A study saves to JSON (`Study.to_json`) without patient data and
rebuilds headless (`rebuild`, `python -m engine study run`): every release is made again from its
settings and its files' sha256 compared with the recorded ones.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from engine import risk
from engine.adversary import EVERY_ADVERSARY, MAX_K, MIN_RELEASE_K, WHOLE_RECORD_NOTE, Adversary, K, check_k
from engine.disclosure.cells import SmallCellError, SmallCellPolicy
from engine.disclosure.dp_budget import BudgetLedger
from engine.disclosure.sensitive import RhoPolicy, SensitiveRisk, rho_refusal
from engine.io.errors import UserError
from engine.io.progress import Progress
from engine.io.pseudonyms import PseudonymKeyError, Pseudonyms, check_key, new_key
from engine.records import Records
from engine.release import Release
from engine.study.parameters import Parameter, SettingsError
from engine.study.runs import MethodSettings, RunInputs, settings_from_dict, settings_to_dict

STUDY_FORMAT = "cohortshield-study/2"
# /1 (before release pseudonyms): its recorded files named patients by source ids
EARLIER_FORMATS = ("cohortshield-study/1",)


class StudyError(UserError, ValueError):
    """A study file or action that cannot be honoured; the message says why in plain words."""


def _whole(value: object, name: str, lo: int, hi: int) -> int:
    """A whole number of a study file in [lo, hi] (not a bool, a text or a decimal), else StudyError."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise StudyError(f"{name} must be a whole number from {lo} to {hi:,}, not {value!r}")
    return value


def _mapping(value: object, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise StudyError(f"{name} must be an object, not {type(value).__name__}")
    return value


def _texts(value: object, name: str) -> tuple[tuple[str, str], ...]:
    """An object of text -> text (groups, inputs, files, load options), sorted."""
    d = _mapping(value, name)
    if not all(isinstance(v, str) for v in d.values()):
        raise StudyError(f"{name} must map names to text")
    return tuple(sorted((str(a), b) for a, b in d.items()))


def ids_fingerprint(ids: Iterable[str]) -> str:
    """sha256 of a group's patient ids (sorted, as text): the same group whatever the file order."""
    h = hashlib.sha256()
    for pid in sorted(map(str, ids)):
        h.update(pid.encode())
        h.update(b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class DataRef:
    """The data a study (or a release) was made from: events fingerprint, groups, inputs, load options."""

    name: str
    events_fingerprint: str
    population: str = "population"
    cohort: str = "cohort"
    biobank: str | None = None
    groups: tuple[tuple[str, str], ...] = ()  # (group role, ids fingerprint)
    inputs: tuple[tuple[str, str], ...] = ()  # (file name, sha256)
    load_options: tuple[tuple[str, str], ...] = ()  # options that change the data, as text

    @property
    def key(self) -> str:
        """One string that changes when the data or any group changes (what releases are keyed on)."""
        return hashlib.sha256(json.dumps([self.events_fingerprint, self.groups]).encode()).hexdigest()[:16]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "events_fingerprint": self.events_fingerprint,
            "population": self.population,
            "cohort": self.cohort,
            "biobank": self.biobank,
            "groups": dict(self.groups),
            "inputs": dict(self.inputs),
            "load_options": dict(self.load_options),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DataRef:
        d = _mapping(d, "data")
        return cls(
            name=str(d["name"]),
            events_fingerprint=str(d["events_fingerprint"]),
            population=str(d.get("population", "population")),
            cohort=str(d.get("cohort", "cohort")),
            biobank=None if d.get("biobank") is None else str(d["biobank"]),
            groups=_texts(d.get("groups", {}), "data.groups"),
            inputs=_texts(d.get("inputs", {}), "data.inputs"),
            load_options=_texts(d.get("load_options", {}), "data.load_options"),
        )


def data_ref(
    name: str,
    events: Records,
    inputs: RunInputs,
    *,
    population: str = "population",
    cohort: str = "cohort",
    biobank: str | None = None,
    sources: Mapping[str, str] | None = None,
    load_options: Mapping[str, object] | None = None,
) -> DataRef:
    """The `DataRef` of loaded data: fingerprints cover every row of the events and every group id."""
    groups = [("population", ids_fingerprint(inputs.population.patient_ids))]
    groups.append(("cohort", ids_fingerprint(inputs.cohort.patient_ids)))
    if inputs.biobank is not None:
        groups.append(("biobank", ids_fingerprint(inputs.biobank.patient_ids)))
    return DataRef(
        name=name,
        events_fingerprint=events.fingerprint,
        population=population,
        cohort=cohort,
        biobank=biobank,
        groups=tuple(sorted(groups)),
        inputs=tuple(sorted((sources or {}).items())),
        load_options=tuple(sorted((str(k), str(v)) for k, v in (load_options or {}).items())),
    )


@dataclass(frozen=True)
class VerificationRecord:
    """The risk engine's verdict, as recorded: adversary, k, records, records below k, unique."""

    scope: str
    knowledge: str
    k: int
    ok: bool
    records: int
    below_k: int
    unique: int

    @property
    def adversary(self) -> Adversary:
        return Adversary(self.scope, self.knowledge)  # type: ignore[arg-type]

    @classmethod
    def of(cls, v: risk.Verification) -> VerificationRecord:
        dis = np.asarray(v.distinguishability)
        return cls(
            v.adversary.scope,
            v.adversary.knowledge,
            int(v.k),
            bool(v.ok),
            len(dis),
            int((dis < v.k).sum()),
            int((dis <= 1).sum()),
        )

    def message(self) -> str:
        if self.ok:
            return f"verified: all {self.records:,} records have distinguishability >= {self.k} ({self.adversary.label})"
        return f"not verified: {self.below_k:,} of {self.records:,} records below k = {self.k} ({self.adversary.label})"


RELEASE_CONTEXTS: dict[str, str] = {
    "public": "public release",
    "controlled": "controlled access under a data use agreement",
    "internal": "internal use, trusted recipients",
    "custom": "a custom threshold with a written reason",
}
# the study-level threshold's parameter (engine.study.parameters; k, scope and knowledge: engine.adversary)
CONTEXT = Parameter(
    "release context", str, "controlled", choices=tuple(RELEASE_CONTEXTS), help="to whom the data go", flag=""
)


@dataclass(frozen=True)
class Determination:
    """To whom the data go and why the study's k is what it is (issue 27; HIPAA's expert
    determination, 45 CFR 164.514(b)(1), documents the anticipated recipient and the threshold).

    `context` is one of `RELEASE_CONTEXTS`; the threshold of maximum risk is 1/k (`Study.threshold`),
    k being the study's. `reason` is the steward's written reason (required for "custom")."""

    recipient: str = ""
    context: str = "controlled"
    reason: str = ""

    def __post_init__(self) -> None:
        try:
            CONTEXT.check(self.context)
        except SettingsError as exc:
            raise StudyError(str(exc)) from None
        if self.context == "custom" and not self.reason.strip():
            raise StudyError("a custom threshold needs a written reason")

    def to_dict(self) -> dict[str, str]:
        return {"recipient": self.recipient, "context": self.context, "reason": self.reason}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Determination:
        if not isinstance(d, Mapping):
            raise StudyError(f"determination must be an object, not {type(d).__name__}")
        for name in ("recipient", "context", "reason"):
            if name in d and not isinstance(d[name], str):
                raise StudyError(f"determination.{name} must be text")
        return cls(str(d.get("recipient", "")), str(d.get("context", "controlled")), str(d.get("reason", "")))


@dataclass(frozen=True)
class StudyRelease:
    """A release in a study: immutable, made by the user's action, with everything needed to rebuild
    it and to show that the files handed over are the files that were verified.

    `verification` is the risk engine's verdict computed in this session (by `make_release` or by the
    re-verification of `rebuild`), or None for a release read from a file and not yet re-verified: a
    verdict read from a file is never believed (`claimed` keeps it for comparison only) and never
    written again (`to_dict` writes only a verdict computed here)."""

    name: str
    settings: MethodSettings
    data: DataRef
    verification: VerificationRecord | None
    files: tuple[tuple[str, str], ...] = ()  # (file name, sha256); empty when not verified
    claimed: VerificationRecord | None = field(default=None, compare=False)  # as read from a file
    recipient: str = ""  # to whom this release goes (issue 28's ledger); "" = the study's recipient
    public: bool = False  # issue 35: published for anyone, so held by every recipient (engine.study.joint)
    # issue 39: why the release fails the study's rho, computed here ("" = meets it or not checked)
    rho_refusal: str = field(default="", compare=False)
    # issue 39, the method option: the codes implying the study's categories were suppressed to meet rho
    rho_suppressed: bool = False

    @property
    def exportable(self) -> bool:
        return (
            self.verification is not None
            and self.verification.ok
            and not self.rho_refusal
            and bool(self.files)
        )

    def verdict_message(self) -> str:
        if self.verification is None:
            return "not re-verified yet: a verdict read from a file is not believed"
        if self.verification.ok and self.rho_refusal:
            return self.rho_refusal
        return self.verification.message()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "settings": settings_to_dict(self.settings),
            "data": self.data.to_dict(),
            "verification": None if self.verification is None else self.verification.__dict__.copy(),
            "files": dict(self.files),
            "recipient": self.recipient,
            "public": self.public,
            **({"rho suppressed": True} if self.rho_suppressed else {}),  # optional: absent = False
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StudyRelease:
        d = _mapping(d, "a release")
        rec = d.get("verification")
        claimed = None if rec is None else _verification(rec)
        public, suppressed = d.get("public", False), d.get("rho suppressed", False)
        for name, value in (("public", public), ("rho suppressed", suppressed)):
            if not isinstance(value, bool):
                raise StudyError(f"release {d.get('name')!r}: {name} must be true or false, not {value!r}")
        try:
            settings = settings_from_dict(_mapping(d["settings"], "settings"))
        except SettingsError as exc:  # the file (Study.from_json), the release, the method, the parameter
            raise StudyError(f"release {d.get('name')!r}: {exc}") from None
        return cls(
            name=str(d["name"]),
            settings=settings,
            data=DataRef.from_dict(d["data"]),
            verification=None,
            files=_texts(d.get("files", {}), "files"),
            claimed=claimed,
            recipient=str(d.get("recipient", "")),
            public=public,
            rho_suppressed=suppressed,
        )


def _verification(rec: object) -> VerificationRecord:
    """A recorded verdict, every field of its type (never coerced): scope and knowledge of an
    adversary, k 2..MAX_K, ok a bool, counts whole numbers."""
    r = _mapping(rec, "verification")
    names = {f.name for f in dataclasses.fields(VerificationRecord)}
    if set(r) != names:
        raise StudyError(f"verification must have the fields {', '.join(sorted(names))}")
    for name in ("scope", "knowledge"):
        if not isinstance(r[name], str):
            raise StudyError(f"verification.{name} must be text, not {r[name]!r}")
    try:
        Adversary(r["scope"], r["knowledge"])
    except ValueError as exc:
        raise StudyError(f"verification: {exc}") from None
    if not isinstance(r["ok"], bool):
        raise StudyError(f"verification.ok must be true or false, not {r['ok']!r}")
    _whole(r["k"], "verification.k", MIN_RELEASE_K, MAX_K)
    for name in ("records", "below_k", "unique"):
        _whole(r[name], f"verification.{name}", 0, 10**12)
    return VerificationRecord(**r)


@dataclass(frozen=True)
class Study:
    """The data, the attacker assumption and the releases made by the user (module docstring)."""

    data: DataRef
    adversary: Adversary = field(default_factory=Adversary)
    k: int = 5
    releases: tuple[StudyRelease, ...] = ()
    # the steward's secret behind the release ids (engine.io.pseudonyms): in the study file only
    pseudonym_key: str = field(default_factory=new_key, repr=False)
    determination: Determination = field(default_factory=Determination)
    # issue 28: counts under this policy are suppressed in every table that leaves (engine.disclosure.cells)
    small_cells: SmallCellPolicy = field(default_factory=SmallCellPolicy)
    # issue 39: the sensitive categories, rho and its reason; None = rho not checked
    sensitive: RhoPolicy | None = None
    # issue 39: each recipient's privacy budget and the DP tables spent against it (engine.disclosure.dp_budget)
    dp_budget: BudgetLedger = field(default_factory=BudgetLedger)

    def __post_init__(self) -> None:
        check_k(self.k)
        try:
            check_key(self.pseudonym_key)
        except PseudonymKeyError as exc:
            raise StudyError(f"the study's pseudonym_key: {exc}") from None

    @property
    def pseudonyms(self) -> Pseudonyms:
        return Pseudonyms(self.pseudonym_key)

    @property
    def threshold(self) -> float:
        """The maximum re-identification risk the study accepts: 1/k (`engine.risk.threshold_of_k`)."""
        return risk.threshold_of_k(self.k)

    def with_determination(self, determination: Determination) -> Study:
        return replace(self, determination=determination)

    # ------------------------------------------------------------------------ releases
    def current(self) -> tuple[StudyRelease, ...]:
        """The releases made from the study's current data and groups."""
        return tuple(r for r in self.releases if r.data.key == self.data.key)

    def others(self) -> tuple[StudyRelease, ...]:
        """Releases made from other data or other groups (kept, never shown as current)."""
        return tuple(r for r in self.releases if r.data.key != self.data.key)

    def get(self, name: str) -> StudyRelease:
        for r in self.releases:
            if r.name == name:
                return r
        raise StudyError(f"no release named {name!r} in this study")

    def unique_name(self, base: str) -> str:
        names = {r.name for r in self.releases}
        if base not in names:
            return base
        n = 2
        while f"{base} ({n})" in names:
            n += 1
        return f"{base} ({n})"

    def add(self, release: StudyRelease) -> Study:
        """The study with one more release; names are unique and releases of other data refused."""
        if any(r.name == release.name for r in self.releases):
            raise StudyError(f"a release named {release.name!r} is already in the study")
        if release.data.key != self.data.key:
            raise StudyError(f"release {release.name!r} was made from other data or groups than the study's")
        return replace(self, releases=(*self.releases, release))

    def admit(self, release: StudyRelease) -> Study:
        """`add` for a release the user just made (the app's "Add to study", `study add`): one that is
        not verified under the study's attacker never enters the study (issue 35, finding 6: it would
        sit in the study without files and fail every rebuild); refused with its verdict."""
        if not release.exportable:
            note = "" if self.adversary.targeted_by_papers else f" ({WHOLE_RECORD_NOTE})"
            raise StudyError(
                f"{release.name!r} is not added to the study: {release.verdict_message()}; "
                f"change its settings until it is verified{note}"
            )
        return self.add(release)

    def with_public(self, name: str, public: bool = True) -> Study:
        """The study with release `name` marked public (held by every recipient) or not."""
        self.get(name)
        return replace(
            self, releases=tuple(replace(r, public=public) if r.name == name else r for r in self.releases)
        )

    def remove(self, name: str) -> Study:
        self.get(name)
        return replace(self, releases=tuple(r for r in self.releases if r.name != name))

    def with_data(self, data: DataRef) -> Study:
        """The study on other data: releases of the old data stay in the file, listed as others."""
        return replace(self, data=data)

    def with_attacker(self, adversary: Adversary, k: int) -> Study:
        return replace(self, adversary=adversary, k=k)

    def with_sensitive(self, policy: RhoPolicy | None) -> Study:
        """The study stating `policy` (categories, rho, reason), or not checking rho (None)."""
        return replace(self, sensitive=policy)

    def with_dp_budget(self, ledger: BudgetLedger) -> Study:
        """The study with its recipients' privacy budgets and DP tables spent (issue 39)."""
        return replace(self, dp_budget=ledger)

    # -------------------------------------------------------------------------- files
    def to_dict(self, *, with_key: bool = True) -> dict[str, Any]:
        """The study file's content. `with_key=False` leaves out the pseudonym key: the form that
        may leave with a bundle (it cannot rebuild byte-identical release files)."""
        out = {
            "format": STUDY_FORMAT,
            "data": self.data.to_dict(),
            "adversary": {"scope": self.adversary.scope, "knowledge": self.adversary.knowledge},
            "k": self.k,
            "releases": [r.to_dict() for r in self.releases],
            "determination": self.determination.to_dict(),
            "small_cells": self.small_cells.to_dict(),
            "dp_budget": self.dp_budget.to_dict(),
        }
        if self.sensitive is not None:  # optional: a study without it is written as before
            out["sensitive"] = self.sensitive.to_dict()
        if with_key:
            out["pseudonym_key"] = self.pseudonym_key
        return out

    def to_json(self, *, with_key: bool = True) -> str:
        return json.dumps(self.to_dict(with_key=with_key), indent=2, sort_keys=True) + "\n"

    def reverified(self, checks: Iterable[RebuildCheck]) -> Study:
        """The study with each rebuilt release's verdict and files replaced by those just computed
        (`rebuild`): a release that failed (files differ, verdict forged or stale, or below k) keeps
        no files and is never exportable."""
        by_name = {c.name: c for c in checks}
        out = []
        for r in self.releases:
            c = by_name.get(r.name)
            if c is None:
                out.append(r)
                continue
            files = c.rebuilt if c.passed else ()
            out.append(
                replace(r, verification=c.verification, files=files, claimed=None, rho_refusal=c.rho_refusal)
            )
        return replace(self, releases=tuple(out))

    @classmethod
    def from_json(cls, text: str | bytes, source: str = "study file") -> Study:
        from engine.io.safejson import JSONRefused, loads

        try:  # size, depth and numbers bounded before and while parsing (engine.io.safejson)
            d = loads(text, source)
        except JSONRefused as exc:
            raise StudyError(f"not a study file: {exc}") from None
        if isinstance(d, dict) and d.get("format") in EARLIER_FORMATS:
            raise StudyError(
                f"{source}: a study of an earlier CohortShield ({d.get('format')}), whose release files named "
                "patients by the source's ids; make its releases again in a new study"
            )
        if not isinstance(d, dict) or d.get("format") != STUDY_FORMAT:
            got = d.get("format") if isinstance(d, dict) else type(d).__name__
            raise StudyError(
                f"{source}: not a CohortShield study (format {got!r}, expected {STUDY_FORMAT!r})"
            )
        unknown = sorted(set(d) - STUDY_FIELDS)
        if unknown:  # never dropped silently: a field this version does not read is not in the study
            raise StudyError(
                f"{source}: unknown field(s) {', '.join(map(repr, unknown))} (a study file has "
                f"{', '.join(sorted(STUDY_FIELDS))})"
            )
        try:
            adversary = _mapping(d["adversary"], "adversary")
            if not all(isinstance(adversary.get(n), str) for n in ("scope", "knowledge")):
                raise StudyError("adversary.scope and adversary.knowledge must be text")
            releases = d.get("releases", [])
            if not isinstance(releases, list):
                raise StudyError(f"releases must be a list, not {type(releases).__name__}")
            return cls(
                data=DataRef.from_dict(d["data"]),
                adversary=Adversary(adversary["scope"], adversary["knowledge"]),
                k=K.check(d["k"]),
                releases=tuple(StudyRelease.from_dict(r) for r in releases),
                pseudonym_key=str(d["pseudonym_key"]),
                determination=Determination.from_dict(d.get("determination", {})),
                small_cells=SmallCellPolicy.from_dict(d.get("small_cells")),
                sensitive=RhoPolicy.from_dict(d.get("sensitive")),
                dp_budget=_dp_budget(d.get("dp_budget")),
            )
        except KeyError as exc:
            raise StudyError(f"{source}: missing field {exc}") from None
        except (StudyError, SmallCellError, UserError) as exc:
            raise StudyError(f"{source}: {exc}") from None
        except (TypeError, ValueError) as exc:
            raise StudyError(f"{source}: {exc.__class__.__name__}: {exc}") from None


# the top-level fields of a study file (`Study.to_dict`); `sensitive` and `pseudonym_key` are optional
STUDY_FIELDS = frozenset(
    {"format", "data", "adversary", "k", "releases", "determination", "small_cells", "dp_budget"}
    | {"sensitive", "pseudonym_key"}
)


def _dp_budget(d: object) -> BudgetLedger:
    """A study file's `dp_budget` (none in a study written before it: no budget, nothing spent); one
    malformed or already over a recipient's budget is refused by name (`Study.from_json` adds the file)."""
    if d is None:
        return BudgetLedger()
    try:
        return BudgetLedger.from_dict(d, "dp_budget")
    except UserError as exc:
        raise StudyError(str(exc)) from None


# ------------------------------------------------------------------------------ making releases
def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, eq=False)
class MadeRelease:
    """A release just made: the study entry, the `Release` object, the verification and the files."""

    entry: StudyRelease
    release: Release
    verification: risk.Verification
    files: dict[str, bytes]
    sensitive: SensitiveRisk | None = None  # the rho measure, when the study states rho


def export_files(
    release: Release,
    verification: risk.Verification,
    spellings: Mapping[str, tuple[str, ...]] | None = None,
    *,
    pseudonyms: Pseudonyms,
    names: Mapping[str, str] | None = None,
) -> dict[str, bytes]:
    """The release's files through the one export gate (`engine.io.export`), patients named by the
    study's release ids; empty when it refuses. `spellings`: the source's spellings of the codes
    (`Dataset.spellings`) for the code map; `names`: an OMOP CDM's concept names
    (`ConceptParents.names`), the code map's `description` column as `anonymize --codemap` writes it
    (issue 37)."""
    from engine.io.export import ExportRefused, release_files

    try:
        return release_files(
            release,
            verification,
            verification.adversary,
            verification.k,
            spellings,
            pseudonyms=pseudonyms,
            names=names,
        )
    except ExportRefused:
        return {}


def make_release(
    name: str,
    settings: MethodSettings,
    inputs: RunInputs,
    data: DataRef,
    adversary: Adversary,
    k: int,
    *,
    progress: Progress | None = None,
    spellings: Mapping[str, tuple[str, ...]] | None = None,
    pseudonyms: Pseudonyms,
    release: Release | None = None,
    rho: RhoPolicy | None = None,
    suppress_rho: bool = False,
) -> MadeRelease:
    """Run a method from its settings (or take `release`, what `settings.run` gave already), verify
    the release under the study's adversary and k (against the population the cohort was drawn
    from) and, when the study states `rho`, its rho measure under the same adversary
    (`engine.disclosure.sensitive`, issue 39), and export it through the gate when verified, patients
    named by `pseudonyms`. A release above rho is refused by name, like one below k. `suppress_rho`:
    the codes implying the study's categories are suppressed first until it meets `rho`
    (`engine.anonymize.sensitive_suppress`; recorded, so that a rebuild does the same)."""
    if release is None:
        release = settings.run(inputs, progress)
    if suppress_rho:
        if rho is None:
            raise StudyError("the study states no rho: there is nothing to suppress the sensitive codes for")
        from engine.anonymize.sensitive_suppress import suppress_sensitive

        release = suppress_sensitive(
            release, [adversary], rho.selected, rho=rho.rho, k=k, m=rho.m, population=inputs.population
        ).release
    verification = risk.verify(release, adversary, k, inputs.population)
    sensitive = None if rho is None else rho.measure(release, adversary, inputs.population)
    refusal = "" if sensitive is None else rho_refusal(sensitive, rho.reason if rho else "")
    names = None if inputs.concepts is None else inputs.concepts.names  # the code map's descriptions
    files = (
        {} if refusal else export_files(release, verification, spellings, pseudonyms=pseudonyms, names=names)
    )
    entry = StudyRelease(
        name=name,
        settings=settings,
        data=data,
        verification=VerificationRecord.of(verification),
        files=tuple(sorted((f, sha256_of(b)) for f, b in files.items())),
        rho_refusal=refusal,
        rho_suppressed=suppress_rho,
    )
    return MadeRelease(entry, release, verification, files, sensitive)


def verification_matrix(
    release: Release,
    population: Records,
    k: int,
    verify: Callable[[Release, Adversary, int, Records], risk.Verification] = risk.verify,
) -> pd.DataFrame:
    """The release verified under each of the four adversaries at k, and under both whole-record ones
    (issue 39: no method of the papers targets them; their verdict is reported): one row per adversary.
    `verify`: `risk.verify` or one that memoizes it (the app's, where k only thresholds)."""
    rows = []
    for adv in EVERY_ADVERSARY:
        rec = VerificationRecord.of(verify(release, adv, k, population))
        rows.append(
            {
                "adversary": adv.label,
                "records": rec.records,
                "below k": rec.below_k,
                "unique": rec.unique,
                "verified": rec.ok,
            }
        )
    return pd.DataFrame(rows)


@dataclass(frozen=True, eq=False)
class RebuildCheck:
    """One release made again from its settings and verified again under the study's adversary and
    k: recorded and rebuilt file hashes, the verdict just computed, and the verdict the file claimed
    (`claimed`, with `claimed_recomputed`, the re-verification under the claim's own adversary and k)."""

    name: str
    recorded: tuple[tuple[str, str], ...]
    rebuilt: tuple[tuple[str, str], ...]
    verification: VerificationRecord
    claimed: VerificationRecord | None = None
    claimed_recomputed: VerificationRecord | None = None
    made: MadeRelease | None = None
    rho_refusal: str = ""  # issue 39: why the rebuilt release fails the study's rho

    @property
    def identical(self) -> bool:
        return self.recorded == self.rebuilt

    @property
    def verdict_forged(self) -> bool:
        """The verdict the file records is not what the risk engine finds for it (changed or stale)."""
        return self.claimed is not None and self.claimed != self.claimed_recomputed

    @property
    def passed(self) -> bool:
        """Byte-identical, verified at the study's k, and no recorded verdict that disagrees."""
        return self.identical and self.verification.ok and not self.rho_refusal and not self.verdict_forged

    def differences(self) -> list[str]:
        rec, got = dict(self.recorded), dict(self.rebuilt)
        out = []
        if self.verdict_forged and self.claimed is not None and self.claimed_recomputed is not None:
            out.append(
                f"the recorded verdict ({self.claimed.message()}) is not the risk engine's "
                f"({self.claimed_recomputed.message()}): the study file was changed or is stale"
            )
        if not self.verification.ok:
            out.append(f"fails re-verification under the study's attacker: {self.verification.message()}")
        if self.rho_refusal:
            out.append(f"fails the study's rho: {self.rho_refusal}")
        for f in sorted(set(rec) | set(got)):
            if f not in got:
                out.append(f"{f}: not written on rebuild ({self.verification.message()})")
            elif f not in rec:
                out.append(f"{f}: written on rebuild but not recorded")
            elif rec[f] != got[f]:
                out.append(f"{f}: sha256 {got[f][:12]}… differs from the recorded {rec[f][:12]}…")
        return out


def rebuild(
    study: Study,
    inputs: RunInputs,
    data: DataRef,
    progress: Progress | None = None,
    *,
    spellings: Mapping[str, tuple[str, ...]] | None = None,
) -> list[RebuildCheck]:
    """Make every release of the study's data again from its settings, verify it under the study's
    adversary and k (never the verdict the file records), export it with the study's pseudonyms and
    compare the files' sha256. A verdict the file records is checked against a re-verification under
    its own adversary and k. `spellings`: the loaded data's spellings of its codes
    (`Dataset.spellings`), as the code maps were recorded with. Raises StudyError when `data` (the
    data loaded now) is not the data the study was made from."""
    if data.key != study.data.key:
        raise StudyError(
            "the data loaded is not the study's: events or groups differ "
            f"(study {study.data.events_fingerprint[:12]}…, loaded {data.events_fingerprint[:12]}…)"
        )
    checks = []
    todo = study.current()
    for i, entry in enumerate(todo):
        step = None
        if progress:
            progress(i / max(len(todo), 1), f"rebuilding {entry.name} ({i + 1} of {len(todo)})")

            def step(f: float, msg: str, i: int = i, name: str = entry.name) -> None:
                progress((i + f) / max(len(todo), 1), f"{name}: {msg}")

        made = make_release(
            entry.name,
            entry.settings,
            inputs,
            data,
            study.adversary,
            study.k,
            progress=step,
            spellings=spellings,
            pseudonyms=study.pseudonyms,
            rho=study.sensitive,
            suppress_rho=entry.rho_suppressed,
        )
        claim = entry.claimed if entry.claimed is not None else entry.verification
        recomputed = made.entry.verification
        if claim is not None and (claim.adversary, claim.k) != (study.adversary, study.k):
            try:
                recomputed = VerificationRecord.of(
                    risk.verify(made.release, claim.adversary, claim.k, inputs.population)
                )
            except ValueError as exc:
                raise StudyError(
                    f"release {entry.name!r}: its recorded verdict cannot be checked: {exc}"
                ) from None
        assert made.entry.verification is not None
        checks.append(
            RebuildCheck(
                entry.name,
                entry.files,
                made.entry.files,
                made.entry.verification,
                claimed=claim,
                claimed_recomputed=recomputed if claim is not None else None,
                made=made,
                rho_refusal=made.entry.rho_refusal,
            )
        )
    return checks
