"""Plain-language glossary and teach-mode texts (issue 16).

Every term the app shows has one entry here: its name in words, one sentence, and the paper and the
place where it is defined (each checked against the texts in the project's seeds). The app shows the
same sentence as the `help=` of every widget and headline using the term (`help_for`) and as a table on
the Glossary page (`glossary_frame`); nothing copies these strings.

`TEACH` holds teach mode's texts: for each page, a two-line statement of what it shows and one
suggested thing to try (`teach`).
"""

from __future__ import annotations

import re
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
    """A glossary entry: the term as shown, one sentence, the paper and the place defining it, a
    one-line example, and the other spellings a page shows it by (`also`: 'DC Local %' for
    Diagnosis Count, Local %)."""

    key: str
    name: str
    sentence: str
    paper: str
    where: str
    example: str
    also: tuple[str, ...] = ()

    @property
    def help(self) -> str:
        """The tooltip text: the sentence, an example and the source."""
        return f"{self.sentence} Example: {self.example} ({self.paper}: {self.where}.)"


_TERMS: tuple[Term, ...] = (
    Term(
        "distinguishability",
        "Distinguishability",
        "The number of records (in the population, or in the released cohort) that hold every code the "
        "attacker knows about a patient; 1 means the patient is unique, and 1 / distinguishability is the "
        "chance of picking the right record.",
        TAMERSOY_2010,
        "Methods, 'distinguishability'; Figure 4",
        "A patient whose visit codes 250.00 and 401.9 are shared by 3 records has distinguishability 3.",
    ),
    Term(
        "k",
        "k (privacy level)",
        "The smallest number of candidate records every released record must have: a release is verified "
        "when no record has a distinguishability below k.",
        TAMERSOY_2010,
        "Methods, GCCens inputs (k-mapped to P)",
        "At k = 5, a record whose known codes only 4 records hold must be changed before release.",
    ),
    Term(
        "k_anonymity",
        "k-anonymity",
        "Each released record is indistinguishable from at least k - 1 other records of the released "
        "data itself (here: the adversary's scope 'cohort').",
        THESIS_2011,
        "section II (related work) and Definition 1",
        "At k = 5, every released patient's codes are shared by at least 5 released patients.",
    ),
    Term(
        "k_map",
        "k-map",
        "Each released record can be matched to at least k records of the population the attacker "
        "searches, not only of the released data (here: the adversary's scope 'population').",
        TAMERSOY_2010,
        "Methods ('k-mapped to P'); thesis section II",
        "At k = 5, every released patient's codes are held by at least 5 of the hospital's 30,000 patients.",
    ),
    Term(
        "km_anonymity",
        "km-anonymity",
        "Terrovitis' model: an attacker who knows at most m codes of a record can link it to no fewer "
        "than k records; UGACLIP's privacy policy replaces the fixed m by the code sets that need "
        "protection.",
        THESIS_2011,
        "section II (related work, Terrovitis et al. [46])",
        "With m = 2, any 2 codes of a record must be held by at least k records.",
    ),
    Term(
        "adversary",
        "Adversary (scope and knowledge)",
        "Who the attacker is: the scope says where they search (the shared cohort, k-anonymity, or the "
        "institution's population, k-map) and the knowledge what they know (the codes of one visit, or "
        "every code of the patient).",
        LOUKIDES_2010,
        "'Privacy policy extraction' (single-visit and all-visits filtering conditions)",
        "'cohort / single visit': the attacker searches the shared file and knows one visit's codes.",
    ),
    Term(
        "single_visit",
        "Single-visit knowledge",
        "The attacker knows the set of codes of one visit of the patient (one service date).",
        LOUKIDES_2010,
        "'Privacy policy extraction', first filtering condition",
        "The attacker saw the patient's 3 March visit: 250.00, 401.9 and 272.4.",
    ),
    Term(
        "all_visits",
        "All-visits knowledge",
        "The attacker knows every code of the patient, from all visits (with how often each was "
        "assigned when repeats are counted, as in GCCens).",
        LOUKIDES_2010,
        "'Privacy policy extraction', second filtering condition",
        "The attacker knows every code of the patient, and that 250.00 was assigned 6 times.",
    ),
    Term(
        "whole_record",
        "Whole-record knowledge",
        "The attacker knows every code of the patient and which codes the patient does not hold, so only "
        "records with exactly the same set of codes match (repeats and visits aside); no method of the "
        "five papers aims at this attacker.",
        PROJECT,
        "issue 39; the flat-table model of ARX, sdcMicro and pycanon",
        "A patient with only 250.00 and 401.9 matches no record that also holds 272.4.",
    ),
    Term(
        "cap",
        "Cap (censoring threshold)",
        "The most repeats of a code released per record; GCCens first removes instances above the cap, "
        "and Tamersoy's CUL does not count those removals.",
        TAMERSOY_2010,
        "Methods, GCCens inputs and Figure 2 step 1 (preprocess)",
        "With a cap of 3, a patient's 7 instances of 250.00 are released as 3.",
    ),
    Term(
        "gccens",
        "GCCens (censoring)",
        "Greedy censoring of repeated diagnosis codes: after the caps, it removes one instance of the "
        "cheapest code at a time until every record has at least k candidates.",
        TAMERSOY_2010,
        "Methods, Figure 2; thesis Algorithm 1",
        "GCCens releases 401.9 twice instead of 5 times where 5 would single a patient out.",
    ),
    Term(
        "faithful",
        "Faithful variant",
        "GCCens as published: each step censors the chosen code in every record that holds it at its "
        "cap, whether or not the record is still below k.",
        THESIS_2011,
        "chapter III, Algorithm 1",
        "Code 250 is lowered from 4 to 3 repeats in every record holding it 4 times.",
    ),
    Term(
        "targeted",
        "Targeted variant",
        "A CohortShield variant of GCCens that censors the chosen code only in records still below k, "
        "keeping more codes; not in the paper.",
        PROJECT,
        "the targeted variant of GCCens",
        "Code 250 is lowered only in the 12 records still below k, not in the other 300.",
    ),
    Term(
        "cul",
        "CUL (censoring utility loss)",
        "The codes censored in a record divided by the codes in that record; as in the paper, measured "
        "against the capped record, so codes the caps removed are not counted.",
        TAMERSOY_2010,
        "'Data Utility Measure' (Tables 1-2)",
        "A record of 10 capped codes with 2 censored has a CUL of 20%.",
        ("CUL",),
    ),
    Term(
        "cul_original",
        "CUL against the original record",
        "Every code instance removed from a record (by the caps and by censoring) divided by the codes of "
        "the original record: the honest counterpart of Tamersoy's CUL.",
        PROJECT,
        "CUL measured against the original record",
        "A record of 12 codes, 2 removed by the cap and 2 censored, has 33% against the original.",
    ),
    Term(
        "instances_retained",
        "Code instances kept",
        "Released code instances (events) as a share of the original cohort's, every removal counted: "
        "caps, censoring, suppression and codes a method does not release at all.",
        PROJECT,
        "code instances against the original cohort",
        "45,000 of 60,000 code events released: 75% of instances kept.",
    ),
    Term(
        "pairs_retained",
        "Pairs retained",
        "Of the cohort's distinct (patient, original code) pairs, the share still represented in the "
        "release file, by the code itself or by a released item standing for it (the code map) that is "
        "specific enough to use: every code it stands for in one phecode family (250.1 and 250.2 under "
        "250), so a catch-all item keeps no pair; repeats, caps and generalization neither inflate nor "
        "hide it.",
        PROJECT,
        "pairs retained, read from the files written",
        "Patient 17's codes 250.00 and 401.9, released as {250.00, 250.01} and 401.9: both pairs retained; "
        "released inside one item standing for 4,921 codes of every chapter: neither.",
    ),
    Term(
        "rows_released",
        "Rows released",
        "Rows of the release file: one per patient and released item (per visit when visits are "
        "shown), or one per occurrence for a method that releases repeated codes (GCCens, LDA), the "
        "only case in which rows count events.",
        PROJECT,
        "the release file's rows",
        "A patient with 4 released items, visits not shown, gives 4 rows.",
    ),
    Term(
        "code_coverage",
        "Distinct codes kept",
        "Of the cohort's distinct codes, the share still released, as themselves or inside a generalized "
        "item; the rest are gone from the release.",
        HEATHERLY_2013,
        "Code Count, 'Computation of Diagnosis Count and Code Count' (Figure 15)",
        "Of 3,117 distinct codes in the cohort, 2,800 still released: 89.8%.",
    ),
    Term(
        "catch_all",
        "Catch-all item",
        "One generalized item holding over half of the released rows: it meets the constraints on paper "
        "but tells the recipient little, since it stands for many codes at once.",
        PROJECT,
        "the catch-all warning",
        "One item {all 120 codes of chapter 390-459} holding 60% of the rows.",
    ),
    Term(
        "records_modified",
        "Records modified",
        "Records of the cohort whose released codes differ from their original codes (a code removed or "
        "generalized, or the record dropped).",
        TAMERSOY_2010,
        "Results ('GCCens modified 16% of the records')",
        "16% of records modified: 84% are released exactly as they were.",
    ),
    Term(
        "ppe",
        "PPE (privacy policy extraction)",
        "Builds the privacy policy, the sets of codes an attacker may know (one visit or all visits), "
        "keeping only the sets that are not already seen in k records or protected by a superset.",
        LOUKIDES_2010,
        "'Privacy policy extraction'",
        "The visit {250.00, 401.9} held by only 2 records becomes a privacy constraint at k = 5.",
    ),
    Term(
        "utility_constraint",
        "Utility constraint",
        "A disease given as a set of codes; it is met when the release still has exactly as many records "
        "with the disease as the original data.",
        LOUKIDES_2010,
        "'Policies' and Table 1",
        "Type 2 diabetes = {250.00, 250.02}: those two may be merged, not with 401.9.",
    ),
    Term(
        "ugaclip",
        "UGACLIP and ACLIP",
        "Generalize codes into sets (and suppress when that fails) until every privacy constraint is met; "
        "UGACLIP only merges codes of the same utility constraint, ACLIP is the baseline that ignores them.",
        LOUKIDES_2010,
        "'Anonymization algorithms' (UGACLIP; ACLIP as its baseline)",
        "UGACLIP releases {250.00, 250.02} as one item so that 5 records share it.",
        ("UGACLIP", "ACLIP"),
    ),
    Term(
        "re",
        "RE (relative error)",
        "How far a case-count query answered on the anonymized data is from its answer on the original "
        "data, relative to the original count; reported as mean and SD over a workload of queries.",
        LOUKIDES_2010,
        "'Utility', RE of ref. 15 (details in the SI text)",
        "A query counting 120 diabetic patients answered 132 on the release: RE 10%.",
        ("RE", "relative error"),
    ),
    Term(
        "ncp",
        "NCP (normalized certainty penalty)",
        "Each code occurrence released inside a set of m codes costs m divided by the number of codes in "
        "the domain, averaged over occurrences; 0 means nothing was generalized.",
        PROJECT,
        "Terrovitis et al. 2008, reported beside UGACLIP",
        "A code released in a set of 4 out of 1,000 codes costs 0.004.",
    ),
    Term(
        "dc_local",
        "Diagnosis Count, Local %",
        "The release's Diagnosis Count (distinct record-diagnosis pairs, a generalized set counting once) "
        "as a percentage of the same records' original count.",
        HEATHERLY_2013,
        "Table 2 and 'Computation of Diagnosis Count and Code Count' (Figure 15)",
        "The cohort had 20,000 (record, diagnosis) pairs and the release 18,000: DC Local 90%.",
        ("DC", "DC Local %", "Diagnosis Count"),
    ),
    Term(
        "cc_local",
        "Code Count, Local %",
        "The number of codes released (as themselves or inside a generalized set) as a percentage of the "
        "same records' original code count; above 100% when sets stand for codes the records never held.",
        HEATHERLY_2013,
        "Table 3 and Table 1 (DEMO_S: 8,747 codes against 8,734)",
        "The records held 900 codes and their released sets stand for 1,140: CC Local 127%.",
        ("CC", "CC Local %", "Code Count"),
    ),
    Term(
        "demo",
        "DEMO_D, DEMO_B, DEMO_S",
        "The cohort anonymized on its own (DEMO_D), extracted from the anonymized biobank (DEMO_B), or "
        "extracted from the anonymized whole population (DEMO_S).",
        HEATHERLY_2013,
        "Table 4 legend and Figure 13",
        "DEMO_S: the 2,700 cohort patients taken from the anonymized 30,000-patient population.",
        ("DEMO_D", "DEMO_B", "DEMO_S"),
    ),
    Term(
        "lost_false",
        "Lost and false associations",
        "Lost: significant in the original PheWAS, not after anonymization (Type I in the paper); false: "
        "significant only after anonymization (Type II).",
        HEATHERLY_2013,
        "'PheWAS' results and Table 4",
        "rs1333049 with heart disease significant before and not after: one lost association.",
    ),
    Term(
        "multiple_testing",
        "Multiple-testing correction",
        "With hundreds of tests some reach p <= 0.05 by chance; Benjamini-Hochberg (the default here) "
        "controls the share of false findings, Heatherly's Table 4 used no correction.",
        HEATHERLY_2013,
        "'PheWAS' methods (p <= 0.05, uncorrected)",
        "Of 1,000 tests at p <= 0.05, about 50 are significant by chance alone.",
    ),
    Term(
        "ilm",
        "ILM (ICD loss)",
        "The Loss Metric of the ICD codes: how far each code was generalized up its hierarchy (0 kept as "
        "is, 1 suppressed), averaged over the dataset.",
        THESIS_2011,
        "Definitions 4, 7 and 8",
        "401.9 released as 401 (one level up of three) costs about 0.33.",
    ),
    Term(
        "alm",
        "ALM (age loss)",
        "The same Loss Metric for the ages: 0 for an exact age, 1 for a suppressed one, in between for an "
        "age range.",
        THESIS_2011,
        "Definitions 4, 7 and 8",
        "Age 47 released as 45-49 costs less than as 40-59.",
    ),
    Term(
        "avgre",
        "AvgRE (average relative error)",
        "The mean relative error of a workload of queries counting the trajectories that hold given "
        "(ICD, Age) pairs.",
        THESIS_2011,
        "section IV.3, 'Capturing Data Utility Using AvgRE'",
        "Queries on (401.9, 45-49) answered with 5% error on average: AvgRE 0.05.",
    ),
    Term(
        "dgh",
        "DGH (domain generalization hierarchy)",
        "A tree of a code's or an age's more and more general values, from the exact value to the root "
        "('any value').",
        THESIS_2011,
        "Definition 2 (Figures 5-6)",
        "401.9 -> 401 -> 401-405 -> any code.",
    ),
    Term(
        "mdav",
        "MDAV (clustering)",
        "Maximum Distance to Average Vector: repeatedly groups the trajectory farthest from the rest with "
        "its k - 1 nearest ones, so each cluster is anonymized together.",
        THESIS_2011,
        "section IV.2, clustering component",
        "With k = 5, the trajectory farthest from the centre and its 4 nearest form one cluster.",
    ),
    Term(
        "ags",
        "A-GS (alignment)",
        "Alignment using Generalization and Suppression: dynamic programming that merges two trajectories "
        "at the least ILM + ALM; Baseline instead matches pairs by position.",
        THESIS_2011,
        "Algorithms 2-3 and Figure 7",
        "(250, 45) and (250.01, 47) aligned as (250, 45-49).",
        ("A-GS", "Baseline"),
    ),
    Term(
        "lda",
        "LDA (Longitudinal Data Anonymizer)",
        "Clusters (ICD, Age) trajectories with MDAV and aligns each cluster's trajectories with A-GS (or "
        "Baseline) so every released trajectory is shared by at least k patients.",
        THESIS_2011,
        "chapter IV",
        "Five patients' (code, age) trajectories released as one shared, generalized trajectory.",
    ),
    Term(
        "recall_at_n",
        "Recall@n",
        "The share of patients whose own record is among the n nearest of 100 candidates; the chance "
        "level is n %.",
        JOHNSON_2018,
        "Methods, re-identification experiment",
        "Recall@1 of 25%: a quarter of patients ranked first among 100 candidates.",
        ("Recall@1", "Recall@n"),
    ),
    # issue 27: risk as an expert determination states it
    Term(
        "prosecutor_risk",
        "Maximum (prosecutor) risk",
        "1 / the smallest distinguishability: the chance that an attacker who targets the most exposed "
        "record picks the right one among its candidates.",
        EL_EMAM_2013,
        "prosecutor risk, maximum; ARX's 'highest prosecutor risk'",
        "The most exposed record has 4 candidates: maximum risk 25%.",
    ),
    Term(
        "average_risk",
        "Average risk",
        "The mean of 1 / distinguishability over the records: the expected share re-identified by an "
        "attacker who matches every record and picks one consistent candidate at random.",
        EL_EMAM_2013,
        "average (marketer) risk",
        "Records with 1, 2 and 4 candidates: average risk (100% + 50% + 25%) / 3 = 58%.",
    ),
    Term(
        "records_at_risk",
        "Records at risk",
        "Records whose risk 1 / distinguishability exceeds the threshold 1/k, that is whose "
        "distinguishability is below k.",
        EL_EMAM_2013,
        "records above the risk threshold",
        "At k = 5 (risk threshold 20%), a record with 3 candidates (33%) is at risk.",
    ),
    Term(
        "risk_threshold",
        "Risk threshold",
        "The highest re-identification risk the study accepts for any record, 1/k: 0.05 (k = 20) or 0.09 "
        "(k = 11) for a public release, 0.2 (k = 5) under a data use agreement, 0.33 (k = 3) for trusted "
        "internal recipients, by precedent.",
        EL_EMAM_2013,
        "thresholds of precedent for the maximum risk",
        "A data use agreement: threshold 20% (k = 5).",
    ),
    Term(
        "release_context",
        "Release context",
        "How and to whom the data are released (public, controlled access under a data use agreement, "
        "internal, or a custom threshold with a written reason); it sets the risk threshold and so k.",
        EL_EMAM_2013,
        "choosing the threshold by how the data are disclosed",
        "'Controlled access under a data use agreement' sets the threshold to 20%.",
    ),
    Term(
        "kmap_estimate",
        "k-map estimate",
        "The share of records unique, or below k, in the population, estimated from the cohort and the "
        "population's size alone; told nothing else it assumes the cohort is a random sample and "
        "underestimates the risk of a cohort selected by its codes, which stating the selection codes "
        "corrects. The share in the cohort alone is an upper bound.",
        PROJECT,
        "after Benedetti and Franconi 1998; El Emam and Dankar 2008",
        "2% of cohort records estimated unique in a population of 30,000.",
    ),
    # issue 28: what leaves besides the release files
    Term(
        "small_cell_policy",
        "Small-cell policy",
        "The smallest count of patients a published table may show: a count in the policy's range (CMS "
        "1-10, All of Us 1-20, OHDSI 1-4, or below a chosen N) reads 'suppressed'; zeros are published.",
        PROJECT,
        "CMS cell-size suppression policy; All of Us data and statistics dissemination policy",
        "Under CMS's policy a count of 7 patients reads 'suppressed'.",
        ("CMS", "OHDSI", "All of Us"),
    ),
    Term(
        "complementary_suppression",
        "Complementary suppression",
        "Further cells suppressed in a table published with its totals, so that no suppressed small "
        "count can be worked out by subtracting the shown cells from a total.",
        PROJECT,
        "complementary suppression of published tables",
        "With a total of 50 and one cell of 3 suppressed, a second cell is suppressed too.",
    ),
    Term(
        "membership_attack",
        "Membership attack",
        "A test by someone who holds a person's genotype and diagnoses of whether that person is in the "
        "cohort behind released PheWAS statistics (a likelihood-ratio test against reference frequencies).",
        PROJECT,
        "after Sankararaman et al. 2009",
        "Holding a neighbour's genotype, an attacker tests whether the PheWAS table includes them.",
    ),
    Term(
        "detection_rate",
        "Detection rate",
        "The share of cohort members the membership attack flags when it wrongly flags 5% of non-members "
        "(its power at 5% false positives); 0.05 is what guessing achieves.",
        PROJECT,
        "after Sankararaman et al. 2009 (power at 5% false positives)",
        "A detection rate of 30% at 5% false positives: the table leaks membership.",
    ),
    Term(
        "ledger",
        "Ledger",
        "The study's releases checked together: two releases sharing patients are linked patient by "
        "patient, as one recipient holding both could, and verified as one release at the study's k.",
        PROJECT,
        "the study's ledger of releases",
        "Two releases sharing 400 patients are checked as one file with both sets of codes.",
    ),
    # issue 26: every other term a page shows in a label or a help text
    Term(
        "method_internal",
        "Method-internal figure",
        "A figure the method reports about itself, measured against its own intermediate data (such as the "
        "capped record) rather than against the original cohort, so it can look better than what the "
        "release really keeps.",
        PROJECT,
        "the honest headlines (issue 16)",
        "Tamersoy's CUL of 0% after a cap of 1 removed half of the codes.",
        ("method-internal", "the paper's measure"),
    ),
    Term(
        "phewas",
        "PheWAS (phenome-wide association study)",
        "One genetic variant tested against every phenotype (phecode) of the cohort, each case group "
        "against the patients without it, to see which diseases the variant is associated with.",
        HEATHERLY_2013,
        "'PheWAS' methods and Figures 1-12",
        "rs1333049 tested against 600 phecodes; coronary heart disease (411.4) comes out significant.",
        ("PheWAS",),
    ),
    Term(
        "phecode",
        "Phecode (PheWAS code)",
        "A phenotype made of related ICD-9-CM or ICD-10-CM codes (phecode map v1.2), the unit PheWAS tests "
        "and Heatherly's default utility constraint.",
        HEATHERLY_2013,
        "'PheWAS' methods (PheWAS codes)",
        "Phecode 250.2 (type 2 diabetes) groups ICD-9-CM 250.00 and 250.02.",
        ("phecodes", "PheWAS code", "PheWAS codes"),
    ),
    Term(
        "snp",
        "SNP (single-nucleotide polymorphism)",
        "A position in the genome where people carry one of two letters; a genotype counts the copies "
        "of the less common one (0, 1 or 2).",
        HEATHERLY_2013,
        "'PheWAS' methods (the SNPs tested)",
        "rs1333049 on chromosome 9p21, a patient's genotype 1 (one copy).",
        ("SNPs",),
    ),
    Term(
        "p_value",
        "p-value and significance level",
        "The chance of an association at least this strong if there were none; an association is "
        "significant when its p-value (after the multiple-testing correction) is at most the chosen "
        "level.",
        HEATHERLY_2013,
        "'PheWAS' methods (p <= 0.05)",
        "p = 0.003 is significant at the level 0.05.",
        ("p", "p-values", "-log10 p", "p_bh", "p_bonferroni"),
    ),
    Term(
        "bh_bonferroni",
        "Benjamini-Hochberg and Bonferroni",
        "Two multiple-testing corrections: Bonferroni multiplies each p-value by the number of tests, "
        "Benjamini-Hochberg (BH) controls the expected share of false findings and is less strict.",
        PROJECT,
        "Benjamini and Hochberg 1995; Bonferroni's inequality",
        "With 500 tests, p = 0.001 becomes 0.5 under Bonferroni and stays significant under BH when few are.",
        ("BH", "Benjamini-Hochberg", "Bonferroni"),
    ),
    Term(
        "odds_ratio",
        "Odds ratio",
        "How much more often the cases carry the variant than the controls, as a ratio of odds; 1 "
        "means no association.",
        HEATHERLY_2013,
        "'PheWAS' methods (allelic test)",
        "An odds ratio of 1.3: cases are 30% more likely to carry the risk allele.",
        ("OR",),
    ),
    Term(
        "qq_plot",
        "QQ-plot (original against released p-values)",
        "Each association's -log10 p-value on the original data against the same test's on the "
        "release; points on the diagonal mean the release gives the same answer.",
        HEATHERLY_2013,
        "Figures 1-6",
        "A point at (6, 2): p = 0.000001 originally, 0.01 on the release.",
        ("QQ-plot", "QQ-plots", "QQ", "QQ panel", "r²", "r2"),
    ),
    Term(
        "manhattan",
        "Manhattan plot",
        "Every phenotype tested for one SNP along the x axis and its -log10 p-value up the y axis; the "
        "significant ones stand above the threshold line.",
        HEATHERLY_2013,
        "PheWAS figures (after the genome-wide association plots)",
        "A point at height 4 above phecode 411.4: p = 0.0001 for heart disease.",
        ("Manhattan",),
    ),
    Term(
        "vae",
        "VAE (variational autoencoder)",
        "A neural network that compresses each patient-day of lab orders into a few numbers (the latent "
        "encoding), meant to hide who the patient is while keeping what the labs predict; on the shipped "
        "sample it does not hide them (the Lab orders page's verdict).",
        JOHNSON_2018,
        "Methods, the latent representation",
        "A day of 12 lab orders encoded as 8 numbers.",
        ("VAE", "latent", "latent encoding", "Latent Recall@1"),
    ),
    Term(
        "lab_uniqueness",
        "Unique by lab orders",
        "The share of patients whose set of lab tests on a number of days no other patient has: they "
        "can be singled out by their orders alone.",
        JOHNSON_2018,
        "Results, uniqueness of lab orders (56.1% of patients)",
        "A patient with a rare test on 3 days is the only one with that pattern.",
        ("unique",),
    ),
    Term(
        "auc",
        "ROC AUC and PR AUC",
        "How well the latent encoding still predicts a held-out day's lab orders: the area under the "
        "ROC curve (0.5 is chance, 1 perfect) and under the precision-recall curve (average precision).",
        JOHNSON_2018,
        "Results (ROC AUC 0.94, PR AUC 0.91)",
        "An ROC AUC of 0.94 in the paper.",
        ("ROC", "AUC", "PR", "ROC AUC", "PR AUC"),
    ),
    Term(
        "icd",
        "ICD-9-CM and ICD-10-CM",
        "The US diagnosis code vocabularies (before and after October 2015) the records use; their "
        "hierarchy (chapter, section, 3-digit code) is what generalization climbs.",
        PROJECT,
        "the vocabularies of the data (CMS)",
        "ICD-9-CM 250.00 and ICD-10-CM E11.9: type 2 diabetes without complications.",
        ("ICD", "ICD-9", "ICD-10", "ICD-9-CM", "ICD-10-CM", "ICD9CM", "ICD10CM"),
    ),
    Term(
        "sd_local",
        "SD % and Local %",
        "Heatherly's two ways to state what a release keeps: SD %, as a share of the whole population's "
        "(the source data's) figure, and Local %, of the same records' original figure.",
        HEATHERLY_2013,
        "Tables 2 and 3",
        "DEMO_S keeps 90% of its own records' diagnoses (Local %), 8% of the population's (SD %).",
        ("SD %", "SD", "DC %", "CC %", "Local %"),
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
    """The glossary as a table (term name order): term, meaning, example, paper, where defined."""
    rows = sorted(_TERMS, key=lambda t: t.name.casefold())
    return pd.DataFrame(
        {
            "term": [t.name for t in rows],
            "meaning": [t.sentence for t in rows],
            "example": [t.example for t in rows],
            "paper": [t.paper for t in rows],
            "where defined": [t.where for t in rows],
        }
    )


def search(text: str) -> list[Term]:
    """The terms (name order) whose name, other spellings, sentence or example contain every word of
    `text` (case-insensitive); all of them for an empty text."""
    words = text.casefold().split()
    rows = sorted(_TERMS, key=lambda t: t.name.casefold())
    return [
        t
        for t in rows
        if all(w in " ".join((t.name, *t.also, t.sentence, t.example)).casefold() for w in words)
    ]


# ------------------------------------------------------------------ terms a page may show (issue 26)
# A jargon token: two capitals or more (CUL, PheWAS, ICD-9-CM), or an '@' (Recall@1), or an
# underscore beside a capital (DEMO_D). Words in plain English never are.
_TOKEN = re.compile(r"(?<![\w@-])[A-Za-z][\w@²]*(?:-[A-Za-z0-9][\w@²]*)*")
# names that are not terms: journals and venues of the papers' citations, file formats, section numbers
NOT_TERMS = frozenset(
    {
        "AMIA",
        "PNAS",
        "PLoS",
        "ONE",
        "PSB",
        "MS",
        "SI",
        "II",
        "III",
        "IV",
        "CSV",
        "JSON",
        "PDF",
        "HTML",
        "ID",
        "IDs",
    }
    | {"US", "ARX", "OMOP", "MEDS", "CDM", "SQL", "URL", "OK", "CohortShield", "De-Identification", "DuckDB"}
)


def _jargon(token: str) -> bool:
    upper = sum(c.isupper() for c in token)
    return upper >= 2 or "@" in token or ("_" in token and upper >= 1)


def _tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text) if _jargon(t)]


def _known() -> frozenset[str]:
    known: set[str] = set()
    for t in _TERMS:
        for text in (t.name, *t.also):
            known.add(text)
            known.update(_tokens(text))
    return frozenset(known)


KNOWN_TOKENS = _known()


def unknown_terms(text: str) -> list[str]:
    """The jargon tokens of `text` (labels, help texts) that no glossary entry names (by its name or
    other spellings) and that are not names outside the glossary's scope (`NOT_TERMS`)."""
    found = [re.sub(r"@\d+$", "@n", t) for t in _tokens(text)]  # Recall@10 is Recall@n
    return [t for t in found if t not in KNOWN_TOKENS and t not in NOT_TERMS]


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
        "Compare raw and latent Recall@n at every n, not n = 1 alone: the verdict names where the encoding raises it.",
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
