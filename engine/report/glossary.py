"""Plain-language glossary and teach-mode texts (issue 16).

Every term the app shows has one entry here: its name in words, one sentence, and the paper and the
place where it is defined (each checked against the texts in the project's seeds). The app shows the
same sentence as the `help=` of every widget and headline using the term (`help_for`) and as a table on
the Glossary page (`glossary_frame`); nothing copies these strings.

`TEACH` holds teach mode's texts: for each page, a two-line statement of what it shows and one
suggested thing to try (`teach`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

TAMERSOY_2010 = "Tamersoy et al. 2010 (AMIA), GCCens"
THESIS_2011 = "Tamersoy 2011 (MS thesis)"
LOUKIDES_2010 = "Loukides et al. 2010 (PNAS), UGACLIP"
HEATHERLY_2013 = "Heatherly et al. 2013 (PLoS ONE)"
JOHNSON_2018 = "Johnson et al. 2018 (PSB)"
PROJECT = "CohortShield (not in the five papers)"
EL_EMAM_2013 = "El Emam 2013, Guide to the De-Identification of Personal Health Information"


@dataclass(frozen=True)
class Term:
    """A glossary entry: the term as shown, one sentence, where it is defined."""

    key: str
    name: str
    sentence: str
    paper: str
    where: str

    @property
    def help(self) -> str:
        """The tooltip text: the sentence and its source."""
        return f"{self.sentence} ({self.paper}: {self.where}.)"


_TERMS: tuple[Term, ...] = (
    Term(
        "distinguishability",
        "Distinguishability",
        "The number of records (in the population, or in the released cohort) that hold every code the "
        "attacker knows about a patient; 1 means the patient is unique, and 1 / distinguishability is the "
        "chance of picking the right record.",
        TAMERSOY_2010,
        "Methods, 'distinguishability'; Figure 4",
    ),
    Term(
        "k",
        "k (privacy level)",
        "The smallest number of candidate records every released record must have: a release is verified "
        "when no record has a distinguishability below k.",
        TAMERSOY_2010,
        "Methods, GCCens inputs (k-mapped to P)",
    ),
    Term(
        "k_anonymity",
        "k-anonymity",
        "Each released record is indistinguishable from at least k - 1 other records of the released "
        "data itself (here: the adversary's scope 'cohort').",
        THESIS_2011,
        "section II (related work) and Definition 1",
    ),
    Term(
        "k_map",
        "k-map",
        "Each released record can be matched to at least k records of the population the attacker "
        "searches, not only of the released data (here: the adversary's scope 'population').",
        TAMERSOY_2010,
        "Methods ('k-mapped to P'); thesis section II",
    ),
    Term(
        "km_anonymity",
        "km-anonymity",
        "Terrovitis' model: an attacker who knows at most m codes of a record can link it to no fewer "
        "than k records; UGACLIP's privacy policy replaces the fixed m by the code sets that need "
        "protection.",
        THESIS_2011,
        "section II (related work, Terrovitis et al. [46])",
    ),
    Term(
        "adversary",
        "Adversary (scope and knowledge)",
        "Who the attacker is: the scope says where they search (the shared cohort, k-anonymity, or the "
        "institution's population, k-map) and the knowledge what they know (the codes of one visit, or "
        "every code of the patient).",
        LOUKIDES_2010,
        "'Privacy policy extraction' (single-visit and all-visits filtering conditions)",
    ),
    Term(
        "single_visit",
        "Single-visit knowledge",
        "The attacker knows the set of codes of one visit of the patient (one service date).",
        LOUKIDES_2010,
        "'Privacy policy extraction', first filtering condition",
    ),
    Term(
        "all_visits",
        "All-visits knowledge",
        "The attacker knows every code of the patient, from all visits (with how often each was "
        "assigned when repeats are counted, as in GCCens).",
        LOUKIDES_2010,
        "'Privacy policy extraction', second filtering condition",
    ),
    Term(
        "cap",
        "Cap (censoring threshold)",
        "The most repeats of a code released per record; GCCens first removes instances above the cap, "
        "and Tamersoy's CUL does not count those removals.",
        TAMERSOY_2010,
        "Methods, GCCens inputs and Figure 2 step 1 (preprocess)",
    ),
    Term(
        "gccens",
        "GCCens (censoring)",
        "Greedy censoring of repeated diagnosis codes: after the caps, it removes one instance of the "
        "cheapest code at a time until every record has at least k candidates.",
        TAMERSOY_2010,
        "Methods, Figure 2; thesis Algorithm 1",
    ),
    Term(
        "faithful",
        "Faithful variant",
        "GCCens as published: each step censors the chosen code in every record that holds it at its "
        "cap, whether or not the record is still below k.",
        THESIS_2011,
        "chapter III, Algorithm 1",
    ),
    Term(
        "targeted",
        "Targeted variant",
        "A CohortShield variant of GCCens that censors the chosen code only in records still below k, "
        "keeping more codes; not in the paper.",
        PROJECT,
        "engine/anonymize/censor.py",
    ),
    Term(
        "cul",
        "CUL (censoring utility loss)",
        "The codes censored in a record divided by the codes in that record; as in the paper, measured "
        "against the capped record, so codes the caps removed are not counted.",
        TAMERSOY_2010,
        "'Data Utility Measure' (Tables 1-2)",
    ),
    Term(
        "cul_original",
        "CUL against the original record",
        "Every code instance removed from a record (by the caps and by censoring) divided by the codes of "
        "the original record: the honest counterpart of Tamersoy's CUL.",
        PROJECT,
        "engine/utility/censoring.py, baseline 'original'",
    ),
    Term(
        "instances_retained",
        "Code instances kept",
        "Released code instances (events) as a share of the original cohort's, every removal counted: "
        "caps, censoring, suppression and codes a method does not release at all.",
        PROJECT,
        "engine/utility/coverage.py",
    ),
    Term(
        "pairs_retained",
        "Pairs retained",
        "Of the cohort's distinct (patient, original code) pairs, the share still represented in the "
        "release file, by the code itself or by a released item standing for it (the code map), so "
        "repeats, caps and generalization neither inflate nor hide it.",
        PROJECT,
        "engine/utility/coverage.py, pairs_retained (read from the files written)",
    ),
    Term(
        "rows_released",
        "Rows released",
        "Rows of the release file: one per patient and released item (per visit when visits are "
        "shown), or one per occurrence for a method that releases repeated codes (GCCens, LDA), the "
        "only case in which rows count events.",
        PROJECT,
        "engine/utility/coverage.py, file_figures",
    ),
    Term(
        "code_coverage",
        "Distinct codes kept",
        "Of the cohort's distinct codes, the share still released, as themselves or inside a generalized "
        "item; the rest are gone from the release.",
        HEATHERLY_2013,
        "Code Count, 'Computation of Diagnosis Count and Code Count' (Figure 15)",
    ),
    Term(
        "catch_all",
        "Catch-all item",
        "One generalized item holding over half of the released rows: it meets the constraints on paper "
        "but tells the recipient little, since it stands for many codes at once.",
        PROJECT,
        "engine/utility/coverage.py",
    ),
    Term(
        "records_modified",
        "Records modified",
        "Records of the cohort whose released codes differ from their original codes (a code removed or "
        "generalized, or the record dropped).",
        TAMERSOY_2010,
        "Results ('GCCens modified 16% of the records')",
    ),
    Term(
        "ppe",
        "PPE (privacy policy extraction)",
        "Builds the privacy policy, the sets of codes an attacker may know (one visit or all visits), "
        "keeping only the sets that are not already seen in k records or protected by a superset.",
        LOUKIDES_2010,
        "'Privacy policy extraction'",
    ),
    Term(
        "utility_constraint",
        "Utility constraint",
        "A disease given as a set of codes; it is met when the release still has exactly as many records "
        "with the disease as the original data.",
        LOUKIDES_2010,
        "'Policies' and Table 1",
    ),
    Term(
        "ugaclip",
        "UGACLIP and ACLIP",
        "Generalize codes into sets (and suppress when that fails) until every privacy constraint is met; "
        "UGACLIP only merges codes of the same utility constraint, ACLIP is the baseline that ignores them.",
        LOUKIDES_2010,
        "'Anonymization algorithms' (UGACLIP; ACLIP as its baseline)",
    ),
    Term(
        "re",
        "RE (relative error)",
        "How far a case-count query answered on the anonymized data is from its answer on the original "
        "data, relative to the original count; reported as mean and SD over a workload of queries.",
        LOUKIDES_2010,
        "'Utility', RE of ref. 15 (details in the SI text)",
    ),
    Term(
        "ncp",
        "NCP (normalized certainty penalty)",
        "Each code occurrence released inside a set of m codes costs m divided by the number of codes in "
        "the domain, averaged over occurrences; 0 means nothing was generalized.",
        PROJECT,
        "Terrovitis et al. 2008, reported beside UGACLIP (engine/anonymize/profiles.py)",
    ),
    Term(
        "dc_local",
        "Diagnosis Count, Local %",
        "The release's Diagnosis Count (distinct record-diagnosis pairs, a generalized set counting once) "
        "as a percentage of the same records' original count.",
        HEATHERLY_2013,
        "Table 2 and 'Computation of Diagnosis Count and Code Count' (Figure 15)",
    ),
    Term(
        "cc_local",
        "Code Count, Local %",
        "The number of codes released (as themselves or inside a generalized set) as a percentage of the "
        "same records' original code count; above 100% when sets stand for codes the records never held.",
        HEATHERLY_2013,
        "Table 3 and Table 1 (DEMO_S: 8,747 codes against 8,734)",
    ),
    Term(
        "demo",
        "DEMO_D, DEMO_B, DEMO_S",
        "The cohort anonymized on its own (DEMO_D), extracted from the anonymized biobank (DEMO_B), or "
        "extracted from the anonymized whole population (DEMO_S).",
        HEATHERLY_2013,
        "Table 4 legend and Figure 13",
    ),
    Term(
        "lost_false",
        "Lost and false associations",
        "Lost: significant in the original PheWAS, not after anonymization (Type I in the paper); false: "
        "significant only after anonymization (Type II).",
        HEATHERLY_2013,
        "'PheWAS' results and Table 4",
    ),
    Term(
        "multiple_testing",
        "Multiple-testing correction",
        "With hundreds of tests some reach p <= 0.05 by chance; Benjamini-Hochberg (the default here) "
        "controls the share of false findings, Heatherly's Table 4 used no correction.",
        HEATHERLY_2013,
        "'PheWAS' methods (p <= 0.05, uncorrected)",
    ),
    Term(
        "ilm",
        "ILM (ICD loss)",
        "The Loss Metric of the ICD codes: how far each code was generalized up its hierarchy (0 kept as "
        "is, 1 suppressed), averaged over the dataset.",
        THESIS_2011,
        "Definitions 4, 7 and 8",
    ),
    Term(
        "alm",
        "ALM (age loss)",
        "The same Loss Metric for the ages: 0 for an exact age, 1 for a suppressed one, in between for an "
        "age range.",
        THESIS_2011,
        "Definitions 4, 7 and 8",
    ),
    Term(
        "avgre",
        "AvgRE (average relative error)",
        "The mean relative error of a workload of queries counting the trajectories that hold given "
        "(ICD, Age) pairs.",
        THESIS_2011,
        "section IV.3, 'Capturing Data Utility Using AvgRE'",
    ),
    Term(
        "dgh",
        "DGH (domain generalization hierarchy)",
        "A tree of a code's or an age's more and more general values, from the exact value to the root "
        "('any value').",
        THESIS_2011,
        "Definition 2 (Figures 5-6)",
    ),
    Term(
        "mdav",
        "MDAV (clustering)",
        "Maximum Distance to Average Vector: repeatedly groups the trajectory farthest from the rest with "
        "its k - 1 nearest ones, so each cluster is anonymized together.",
        THESIS_2011,
        "section IV.2, clustering component",
    ),
    Term(
        "ags",
        "A-GS (alignment)",
        "Alignment using Generalization and Suppression: dynamic programming that merges two trajectories "
        "at the least ILM + ALM; Baseline instead matches pairs by position.",
        THESIS_2011,
        "Algorithms 2-3 and Figure 7",
    ),
    Term(
        "lda",
        "LDA (Longitudinal Data Anonymizer)",
        "Clusters (ICD, Age) trajectories with MDAV and aligns each cluster's trajectories with A-GS (or "
        "Baseline) so every released trajectory is shared by at least k patients.",
        THESIS_2011,
        "chapter IV",
    ),
    Term(
        "recall_at_n",
        "Recall@n",
        "The share of patients whose own record is among the n nearest of 100 candidates; the chance "
        "level is n %.",
        JOHNSON_2018,
        "Methods, re-identification experiment",
    ),
    # issue 27: risk as an expert determination states it
    Term(
        "prosecutor_risk",
        "Maximum (prosecutor) risk",
        "1 / the smallest distinguishability: the chance that an attacker who targets the most exposed "
        "record picks the right one among its candidates.",
        EL_EMAM_2013,
        "prosecutor risk, maximum; ARX's 'highest prosecutor risk'",
    ),
    Term(
        "average_risk",
        "Average risk",
        "The mean of 1 / distinguishability over the records: the expected share re-identified by an "
        "attacker who matches every record and picks one consistent candidate at random.",
        EL_EMAM_2013,
        "average (marketer) risk",
    ),
    Term(
        "records_at_risk",
        "Records at risk",
        "Records whose risk 1 / distinguishability exceeds the threshold 1/k, that is whose "
        "distinguishability is below k.",
        EL_EMAM_2013,
        "records above the risk threshold",
    ),
    Term(
        "risk_threshold",
        "Risk threshold",
        "The highest re-identification risk the study accepts for any record, 1/k: 0.05 (k = 20) or 0.09 "
        "(k = 11) for a public release, 0.2 (k = 5) under a data use agreement, 0.33 (k = 3) for trusted "
        "internal recipients, by precedent.",
        EL_EMAM_2013,
        "thresholds of precedent for the maximum risk",
    ),
    Term(
        "release_context",
        "Release context",
        "How and to whom the data are released (public, controlled access under a data use agreement, "
        "internal, or a custom threshold with a written reason); it sets the risk threshold and so k.",
        EL_EMAM_2013,
        "choosing the threshold by how the data are disclosed",
    ),
    Term(
        "kmap_estimate",
        "k-map estimate",
        "The share of records unique, or below k, in the population, estimated from the cohort and the "
        "population's size alone; it assumes the cohort is a random sample and underestimates the risk of "
        "a cohort selected by its codes.",
        PROJECT,
        "engine/estimate/kmap.py (after Benedetti and Franconi 1998; El Emam and Dankar 2008)",
    ),
    # issue 28: what leaves besides the release files
    Term(
        "small_cell_policy",
        "Small-cell policy",
        "The smallest count of patients a published table may show: a count in the policy's range (CMS "
        "1-10, All of Us 1-20, OHDSI 1-4, or below a chosen N) reads 'suppressed'; zeros are published.",
        PROJECT,
        "engine/disclosure/cells.py; CMS cell-size suppression policy, All of Us dissemination policy",
    ),
    Term(
        "complementary_suppression",
        "Complementary suppression",
        "Further cells suppressed in a table published with its totals, so that no suppressed small "
        "count can be worked out by subtracting the shown cells from a total.",
        PROJECT,
        "engine/disclosure/cells.py, suppress_counts",
    ),
    Term(
        "membership_attack",
        "Membership attack",
        "A test by someone who holds a person's genotype and diagnoses of whether that person is in the "
        "cohort behind released PheWAS statistics (a likelihood-ratio test against reference frequencies).",
        PROJECT,
        "engine/utility/membership.py (after Sankararaman et al. 2009)",
    ),
    Term(
        "detection_rate",
        "Detection rate",
        "The share of cohort members the membership attack flags when it wrongly flags 5% of non-members "
        "(its power at 5% false positives); 0.05 is what guessing achieves.",
        PROJECT,
        "engine/utility/membership.py, attack",
    ),
    Term(
        "ledger",
        "Ledger",
        "The study's releases checked together: two releases sharing patients are linked patient by "
        "patient, as one recipient holding both could, and verified as one release at the study's k.",
        PROJECT,
        "engine/study/ledger.py",
    ),
)
TERMS: dict[str, Term] = {t.key: t for t in _TERMS}


def term(key: str) -> Term:
    """The entry of `key`; a KeyError names the known keys."""
    try:
        return TERMS[key]
    except KeyError:
        raise KeyError(f"no glossary term {key!r}; known: {', '.join(TERMS)}") from None


def help_for(*keys: str) -> str:
    """The help text of one or more terms (their sentences and sources, joined)."""
    return "\n\n".join(term(k).help for k in keys)


def glossary_frame() -> pd.DataFrame:
    """The glossary as a table (term name order): term, meaning, paper, where defined."""
    rows = sorted(_TERMS, key=lambda t: t.name.casefold())
    return pd.DataFrame(
        {
            "term": [t.name for t in rows],
            "meaning": [t.sentence for t in rows],
            "paper": [t.paper for t in rows],
            "where defined": [t.where for t in rows],
        }
    )


# ------------------------------------------------------------------------------- teach mode
@dataclass(frozen=True)
class Teach:
    """A page's teach-mode text: what it shows (two lines) and one thing to try."""

    shows: tuple[str, str]
    try_this: str


TEACH: dict[str, Teach] = {
    "cohort": Teach(
        (
            "The data loaded: how many patients, visits and diagnosis codes, and what validation found.",
            "The cohort is the group you mean to share; the population is everyone an attacker could search.",
        ),
        "Switch the sidebar's cohort to 'population' and read the warning that appears.",
    ),
    "risk": Teach(
        (
            "How many patients could be singled out by the codes an attacker knows, before any anonymization.",
            "Each curve is one kind of attacker; the red line marks k, the fewest candidates a release may leave.",
        ),
        "Change the sidebar's knowledge from single visit to all visits and watch the share of unique patients.",
    ),
    "anonymize": Teach(
        (
            "Four methods that change the cohort until no patient has fewer than k look-alike records.",
            "Each release is verified again by the risk engine and measured against the original cohort.",
        ),
        "Make a GCCens release with a universal cap of 3, then compare its 'kept of the original' with its CUL.",
    ),
    "tradeoffs": Teach(
        (
            "How each method's loss grows as the privacy level k (or the cap) rises, recomputed on your data.",
            "Every point is a full run verified by the risk engine.",
        ),
        "Find the k at which the share of records modified first passes one half.",
    ),
    "phewas": Teach(
        (
            "Whether the genetic associations found in the original data survive in each release.",
            "A lost association was significant before and not after; a false one appears only after.",
        ),
        "Switch the multiple-testing correction to Heatherly's 'none' and see how many associations appear.",
    ),
    "labs": Teach(
        (
            "How unique patients are by the lab tests ordered on a few days, and a latent encoding meant to hide them.",
            "Recall@1 is how often the right patient comes first among 100; chance is 1%.",
        ),
        "Compare the raw and the latent Recall@1 and decide whether the encoding protects anyone.",
    ),
    "report": Teach(
        (
            "Every release of the study verified under all four attackers, and the report for the review board.",
            "Only verified releases' files go into the bundle.",
        ),
        "Build the report with one release left out and read its plain-language summary.",
    ),
    "compare": Teach(
        (
            "Every release of the study side by side: risk, what it keeps of the original cohort, what it breaks.",
            "The best value in each column is marked; no single release is best at everything.",
        ),
        "Add a second release with a larger k and see which columns it wins and which it loses.",
    ),
    "glossary": Teach(
        (
            "Every term the app uses, in one sentence, with the paper and the place that defines it.",
            "The same sentence appears when you hover over the (?) beside a figure.",
        ),
        "Look up CUL and read why it can say 0 while codes were removed.",
    ),
}


def teach(page: str) -> Teach:
    """Teach mode's text for a page (keys of `TEACH`)."""
    return TEACH[page]
