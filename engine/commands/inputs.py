"""The inputs most subcommands share: an events file and the patient-id lists of the groups
(Heatherly's Figure 14: population, biobank, cohort), loaded and validated once, the same way."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.loaders import load_events, load_ids
from engine.records import Records


@dataclass(frozen=True, eq=False)
class GroupInputs:
    """Records of every group, and the sha256 of every file read (for reports)."""

    events: Records  # every patient of the events file
    population: Records
    cohort: Records
    biobank: Records | None = None
    sources: dict[str, str] = field(default_factory=dict)


def load_groups(
    events: str, population: str | None = None, cohort: str | None = None, biobank: str | None = None
) -> GroupInputs:
    """Load EVENTS and the id lists. The population defaults to every patient in EVENTS and the cohort
    to the population; each list must lie within the population (a DataError names the file and the
    patients that do not)."""
    loaded = load_events(events)
    records = Records.from_frame(loaded.data)
    sources = dict(loaded.sources)

    def ids(path: str, within: Records, group: str) -> Records:
        got = load_ids(path, population=within.patient_ids, group=group)
        sources.update(got.sources)
        return within.subset(got.data)

    pop = ids(population, records, "population") if population else records
    bio = ids(biobank, pop, "biobank") if biobank else None
    coh = ids(cohort, pop, "cohort") if cohort else pop
    return GroupInputs(records, pop, coh, bio, sources)
