"""A loaded dataset: the population's events, named patient groups, genotypes and lab orders.

Groups follow Heatherly's Figure 14: `population` (every patient of the institution), `biobank`
(the patients with DNA samples), `cohort` (the research cohort drawn from the biobank). Users may
name any group as population or cohort; `group_records` extracts the records of a group.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from engine.records import Records


@dataclass(frozen=True, eq=False)
class Dataset:
    name: str
    events: Records  # every patient with events
    groups: dict[str, np.ndarray] = field(default_factory=dict)  # group name -> patient ids (str)
    genotypes: pd.DataFrame | None = None  # patient_id + one column per SNP (0/1/2, NaN missing)
    labs: pd.DataFrame | None = None  # patient_id, day, lab
    sources: dict[str, str] = field(default_factory=dict)  # file name -> sha256, for the report
    # code -> its spellings in the source, when normalization rewrote any (the export's code map)
    spellings: dict[str, tuple[str, ...]] | None = None

    def group_ids(self, name: str) -> np.ndarray:
        if name == "population" and "population" not in self.groups:
            return self.events.patient_ids
        if name not in self.groups:
            raise KeyError(f"no patient group named {name!r}; groups: {sorted(self.groups)}")
        return self.groups[name]

    def group_records(self, name: str) -> Records:
        """Records of a group's patients (patients of the group with no events are an error)."""
        return self.events.subset(self.group_ids(name))
