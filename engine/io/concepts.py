"""An OMOP CDM's own hierarchy and concept names (issue 37), read by `engine.io.omop`
(`read_concept_parents`) and carried with the events it read (`Dataset.concepts`,
`RunInputs.concepts`). A leaf module: the data model refers to it without importing the readers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class ConceptParents:
    """A CDM's own hierarchy over item labels (issue 37): each concept's parents
    (`concept_ancestor` rows of `min_levels_of_separation` 1), its concept id (the tie rule of
    `Hierarchy.from_poly_parents`) and its name (`concept_name`, for descriptions)."""

    parents: dict[str, list[str]]
    concept_id: dict[str, int]
    names: dict[str, str]

    @property
    def fingerprint(self) -> str:
        """A digest of the parent links and concept ids (memo keys of the trees built from them)."""
        import hashlib

        links = sorted((c, tuple(sorted(ps))) for c, ps in self.parents.items())
        text = repr((links, sorted(self.concept_id.items())))
        return hashlib.sha256(text.encode()).hexdigest()

    def hierarchy(self, items: Sequence[str]):
        """The generalization tree of these items (`engine.hierarchy.Hierarchy.from_poly_parents`)."""
        from engine.hierarchy import Hierarchy

        return Hierarchy.from_poly_parents(
            self.parents, items, order=self.concept_id, name="cdm concept_ancestor"
        )
