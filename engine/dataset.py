"""A loaded dataset: the population's events, named patient groups, genotypes and lab orders.

Groups follow Heatherly's Figure 14: `population` (every patient of the institution), `biobank`
(the patients with DNA samples), `cohort` (the research cohort drawn from the biobank). Users may
name any group as population or cohort; `group_records` extracts the records of a group.

An imported source (`engine.io.imports`) has no cohort file of its own: `CohortSpec` says which of its
patients are the cohort (the whole source, an uploaded id list, or a group the source defines), and
`Dataset.with_cohort` makes that the `cohort` group; the population stays every patient of the source.

Lab orders may be given `Deferred`: read and validated when `labs` is first read (issue 24: the shipped
sample's 6.9 million lab orders are read by the Lab orders page and a few measures, not by the first
load). Every reader of `Dataset.labs` gets the frame (or None), as when it was given read.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, overload

import numpy as np
import pandas as pd

from engine.records import Records

if TYPE_CHECKING:
    from engine.io.concepts import ConceptParents

T = TypeVar("T")


class Deferred(Generic[T]):
    """A value computed on its first use, once, under a lock (the shipped sample's dataset is shared
    by the server's sessions, so by threads); an exception the computation raises is raised again at
    every use, never computed twice.

    `fingerprint`: a fingerprint of the value's whole content known before it is computed, or None
    (the shipped sample's lab orders: the sha256 of the bytes they are parsed from and of the read's
    options, `engine.io.loaders.load_dataset(defer_labs=True)`)."""

    def __init__(self, compute: Callable[[], T], fingerprint: str | None = None) -> None:
        self._compute: Callable[[], T] | None = compute
        self.fingerprint = fingerprint
        self._warming: threading.Thread | None = None
        self._lock = threading.Lock()
        self._value: T | None = None
        self._error: BaseException | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a pool job's data, issue 38 finding 4): the computation, or its value or error once
        done, not the lock nor a warming thread, which are this process's (`__setstate__` makes a new
        lock). The computation is read first: a copy taken while another thread computes, computes."""
        compute = self._compute
        return {
            "_compute": compute,
            "fingerprint": self.fingerprint,
            "_value": self._value,
            "_error": self._error,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._warming = None

    @property
    def done(self) -> bool:
        """Whether the value was computed (or its computation failed)."""
        return self._compute is None

    def warm(self, after: threading.Thread, then: Callable[[T], object] | None = None) -> threading.Thread:
        """Compute the value in a daemon thread once `after` has ended (issue 24: the shipped sample's
        lab orders, read in the server after the page that loaded the sample has drawn), then
        `then(value)`; once per value (later calls return the same thread). A failure is kept for the
        value's users (`get` raises it); `then`'s is dropped (its users compute what it would have)."""
        with _WARM_LOCK:
            if self._warming is None:

                def run() -> None:
                    after.join()
                    try:
                        value = self.get()
                        if then is not None:
                            then(value)
                    except Exception:  # get() keeps it for the value's users
                        pass

                self._warming = threading.Thread(target=run, name="cohortshield-warm", daemon=True)
                self._warming.start()
            return self._warming

    def get(self) -> T:
        with self._lock:
            if self._compute is not None:
                try:
                    self._value = self._compute()
                except BaseException as exc:
                    self._error = exc
                    raise
                finally:
                    self._compute = None  # the closure (and the bytes it holds) let go
            if self._error is not None:
                raise self._error
            return self._value  # type: ignore[return-value]


_WARM_LOCK = threading.Lock()


LabsValue: TypeAlias = "pd.DataFrame | Deferred[pd.DataFrame | None] | None"


class _MaybeDeferred:
    """`Dataset.labs`: a frame, None, or a `Deferred` frame resolved on read (its field's default,
    read on the class, is None). The value as given is kept in the instance under `_labs`."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    @overload
    def __get__(self, obj: None, owner: Any = None) -> None: ...
    @overload
    def __get__(self, obj: object, owner: Any = None) -> pd.DataFrame | None: ...
    def __get__(self, obj: object | None, owner: Any = None) -> pd.DataFrame | None:
        if obj is None:
            return None
        value = obj.__dict__[self.slot]
        return value.get() if isinstance(value, Deferred) else value

    def __set__(self, obj: object, value: LabsValue) -> None:
        obj.__dict__[self.slot] = value


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    events: Records  # every patient with events
    groups: dict[str, np.ndarray] = field(default_factory=dict)  # group name -> patient ids (str)
    genotypes: pd.DataFrame | None = None  # patient_id + one column per SNP (0/1/2, NaN missing)
    labs: _MaybeDeferred = _MaybeDeferred()  # patient_id, day, lab (a frame, None or Deferred: see above)
    sources: dict[str, str] = field(default_factory=dict)  # file name -> sha256, for the report
    # code -> its spellings in the source, when normalization rewrote any (the export's code map)
    spellings: dict[str, tuple[str, ...]] | None = None
    # an OMOP CDM's own hierarchy and concept names (`engine.io.concepts.ConceptParents`, issue 37): set
    # when the events are a CDM's standard concepts and it has concept and concept_ancestor tables
    concepts: ConceptParents | None = None

    @property
    def labs_read(self) -> bool:
        """Whether the lab orders are read (given read, or given `Deferred` and read since)."""
        value = self.__dict__["_labs"]
        return not isinstance(value, Deferred) or value.done

    @property
    def labs_fingerprint(self) -> str | None:
        """A fingerprint of the lab orders' whole content known without reading them: the `Deferred`'s
        (the shipped sample's, from its file's bytes), else None (lab orders given read, an upload's,
        are fingerprinted by their values: `ui.fingerprints.labs_fingerprint`)."""
        value = self.__dict__["_labs"]
        return value.fingerprint if isinstance(value, Deferred) else None

    def group_ids(self, name: str) -> np.ndarray:
        if name == "population" and "population" not in self.groups:
            return self.events.patient_ids
        if name not in self.groups:
            raise KeyError(f"no patient group named {name!r}; groups: {sorted(self.groups)}")
        return self.groups[name]

    def group_records(self, name: str) -> Records:
        """Records of a group's patients (patients of the group with no events are an error)."""
        return self.events.subset(self.group_ids(name))

    def with_cohort(self, ids: np.ndarray | None) -> Dataset:
        """This dataset with `ids` as its `cohort` group (Heatherly's Figure 14: the cohort is drawn
        from the population, here every patient of the source). None: no cohort group, so the cohort
        is the whole population, as for a source read with no cohort."""
        groups = {g: v for g, v in self.groups.items() if g != "cohort"}
        if ids is not None:
            groups["cohort"] = np.asarray(ids, dtype=object)
        return replace(self, groups=groups, labs=self.__dict__["_labs"])  # deferred lab orders stay so


COHORT_KINDS: tuple[tuple[str, str], ...] = (
    ("whole", "The whole source"),
    ("list", "A list of patient ids (upload)"),
    ("group", "A group of the source"),
)


@dataclass(frozen=True)
class CohortSpec:
    """Which patients of an imported source are the research cohort.

    `whole`: every patient of the source (the cohort is the population); `list`: the patients of an
    uploaded id list, `name` its file name (the file itself is never kept: it must be uploaded again
    to reopen a study); `group`: a group the source defines, `name` the group's name as
    `engine.io.groups` names it, `column` the long-form file's group column it comes from."""

    kind: str = "whole"
    name: str = ""
    column: str = ""

    def __post_init__(self) -> None:
        if self.kind not in dict(COHORT_KINDS):
            raise ValueError(f"no cohort kind {self.kind!r} (kinds: {', '.join(dict(COHORT_KINDS))})")

    def to_options(self) -> dict[str, str]:
        """Text for a study's load options (`cohort`: `list: ids.csv` / `group: cohort 1`; the whole
        source records nothing)."""
        if self.kind == "whole":
            return {}
        out = {"cohort": f"{self.kind}: {self.name}"}
        if self.column:
            out["cohort_column"] = self.column
        return out

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> CohortSpec:
        """The cohort recorded by `to_options` (the whole source when none is recorded)."""
        text = str(options.get("cohort", "") or "")
        if not text:
            return cls()
        kind, _, name = text.partition(": ")
        return cls(kind=kind, name=name, column=str(options.get("cohort_column", "") or ""))

    def describe(self) -> str:
        """One line saying what the cohort is."""
        if self.kind == "list":
            return f"the patients of the list {self.name}"
        if self.kind == "group":
            return f"the group {self.column} = {self.name}" if self.column else f"the group {self.name}"
        return "the whole source (the population is the same patients)"
