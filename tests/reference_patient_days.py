"""`engine.labs.reident.patient_days` as it was before issue 36's faster first opening (at b6a862b):
every patient id hashed (`pd.factorize`) although a file sorted by patient holds each patient's rows
together. Copied verbatim but for the module prefix of the helpers it still shares. Kept as the plain
reference the engine's patient-days are compared with (tests/test_labs_days_fast.py). Not used by the
engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import scipy.sparse as sp

from engine.labs.reident import (
    DAY,
    LAB,
    LAB_COLUMNS,
    PATIENT,
    PatientDays,
    _codes,
    _day_codes,
    _sorted_unique,
)


def patient_days(labs: pd.DataFrame) -> PatientDays:
    missing = [c for c in LAB_COLUMNS if c not in labs.columns]
    if missing:
        raise ValueError(f"lab orders need columns {list(LAB_COLUMNS)}; missing {missing}")
    if len(labs) == 0:
        raise ValueError("no lab orders to analyse")
    p_code, patient_ids = _codes(labs[PATIENT], sort=False)
    lab_values = labs[LAB]
    if not isinstance(lab_values.dtype, pd.CategoricalDtype):
        lab_values = lab_values.astype(str)
    l_code, lab_labels = _codes(lab_values, sort=True)
    d_code, n_day_values, day_label = _day_codes(labs[DAY], len(patient_ids))
    uniq_day_key, day_row = _sorted_unique(p_code * n_day_values + d_code)
    n_days = len(uniq_day_key)
    row_patient = uniq_day_key // n_day_values
    n_labs = len(lab_labels)
    cell = day_row * n_labs + l_code
    if len(cell) and bool(np.all(cell[1:] > cell[:-1])):
        rows, cols = day_row, l_code
    else:
        rows, cols = np.divmod(_sorted_unique(cell)[0], n_labs)
    indptr = np.zeros(n_days + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n_days), out=indptr[1:])
    matrix = sp.csr_matrix(
        (np.ones(len(cols), dtype=np.float32), cols.astype(np.int32), indptr), shape=(n_days, n_labs)
    )
    patient_ptr = np.zeros(len(patient_ids) + 1, dtype=np.int64)
    np.cumsum(np.bincount(row_patient, minlength=len(patient_ids)), out=patient_ptr[1:])
    return PatientDays(
        patient_ids=np.asarray(patient_ids).astype(str).astype(object),
        labs=np.asarray(lab_labels).astype(str).astype(object),
        patient_ptr=patient_ptr,
        day_labels=day_label(uniq_day_key % n_day_values),
        matrix=matrix,
    )
