"""The numbers printed in Gao, Ver Steeg & Galstyan (NIPS 2016), as data.

* :data:`TABLE5` - supplementary Table 5 ("Average cross validation error rate
  comparison of VMI against other methods"): for each of the 17 datasets and 8
  methods, (mean, std) of the CV error rate in percent, averaged over 10..100
  selected features. Keys are the loader names of
  :mod:`vmi_spark.experiments.datasets`; methods use the project's names.
* :data:`WTL` - the table's last two rows: win/tie/loss counts of VMI_naive
  (``W1/T1/L1``) and VMI_pairwise (``W2/T2/L2``) against each baseline, from a
  paired t-test at the 5% level.
* :data:`SYNTHETIC_MI` - Table "Mutual information between label y and each
  feature x_i" of the synthetic tree model (estimated in the paper with N=100,000).

The main-text Table 2 is the same as Table 5 without MIM and CIFE, except that its
star markers for Splice/KrVsKp differ; Table 5 is used here.
"""

from __future__ import annotations

#: Table 5 column order, as the project's method names
METHODS = ["mrmr", "jmi", "mim", "cmim", "cife", "spec_cmi", "vmi_naive", "vmi_pairwise"]
#: how the paper writes them
METHOD_LABELS = {"mrmr": "mRMR", "jmi": "JMI", "mim": "MIM", "cmim": "CMIM", "cife": "CIFE",
                 "spec_cmi": "SPEC_CMI", "vmi_naive": "VMI_naive", "vmi_pairwise": "VMI_pairwise"}
#: loader name -> the paper's row label
DATASET_LABELS = {"lung": "Lung", "colon": "Colon", "leukemia": "Leukemia", "lymphoma": "Lymphoma",
                  "splice": "Splice", "landsat": "Landsat", "waveform": "Waveform", "krvskp": "KrVsKp",
                  "ionosphere": "Ionosphere", "semeion": "Semeion", "multifeat": "Multifeat.",
                  "optdigits": "Optdigits", "musk2": "Musk2", "spambase": "Spambase",
                  "promoter": "Promoter", "gisette": "Gisette", "madelon": "Madelon"}

_ROWS = {
    "lung": [(10.9, 4.7), (11.6, 4.7), (18.3, 5.4), (11.4, 3.0), (23.3, 5.4), (11.6, 5.6), (7.4, 3.6), (14.5, 6.0)],
    "colon": [(19.7, 2.6), (17.3, 3.0), (22.0, 4.3), (18.4, 2.6), (23.5, 4.3), (16.1, 2.0), (11.2, 2.7), (11.9, 1.7)],
    "leukemia": [(0.4, 0.7), (1.4, 1.2), (2.5, 1.1), (1.1, 2.0), (4.9, 1.9), (1.8, 1.3), (0.0, 0.1), (0.2, 0.5)],
    "lymphoma": [(5.6, 2.8), (6.6, 2.2), (13.0, 6.4), (8.6, 3.3), (35.6, 4.3), (12.0, 6.6), (3.7, 1.9), (5.2, 3.1)],
    "splice": [(13.6, 0.4), (13.7, 0.5), (13.6, 0.5), (13.7, 0.5), (14.7, 0.3), (13.7, 0.5), (13.7, 0.5), (13.7, 0.5)],
    "landsat": [(19.5, 1.2), (18.9, 1.0), (22.0, 3.8), (19.1, 1.1), (19.7, 1.7), (21.0, 3.5), (18.8, 0.8), (18.8, 1.0)],
    "waveform": [(15.9, 0.5), (15.9, 0.5), (16.1, 0.8), (16.0, 0.7), (22.8, 2.2), (15.9, 0.6), (15.9, 0.6), (15.9, 0.5)],
    "krvskp": [(5.1, 0.7), (5.2, 0.6), (5.3, 0.6), (5.3, 0.5), (5.0, 0.7), (5.1, 0.6), (5.3, 0.5), (5.1, 0.7)],
    "ionosphere": [(12.8, 0.9), (16.6, 1.6), (13.3, 0.9), (13.1, 0.8), (16.1, 1.6), (16.8, 1.6), (12.7, 1.9), (12.0, 1.0)],
    "semeion": [(23.4, 6.5), (24.8, 7.6), (26.7, 9.7), (16.3, 4.4), (28.6, 5.8), (26.0, 9.3), (14.0, 4.0), (14.5, 3.9)],
    "multifeat": [(4.0, 1.6), (4.0, 1.6), (4.9, 2.3), (3.6, 1.2), (7.2, 3.0), (4.8, 3.0), (3.0, 1.1), (3.5, 1.1)],
    "optdigits": [(7.6, 3.3), (7.6, 3.2), (7.9, 3.9), (7.5, 3.4), (8.1, 4.2), (9.2, 6.0), (7.2, 2.5), (7.6, 3.6)],
    "musk2": [(12.4, 0.7), (12.8, 0.7), (14.0, 1.2), (13.0, 1.0), (13.2, 0.6), (15.1, 1.8), (12.8, 0.6), (12.6, 0.5)],
    "spambase": [(6.9, 0.7), (7.0, 0.8), (7.3, 0.9), (6.8, 0.7), (10.3, 1.8), (9.0, 2.3), (6.6, 0.3), (6.6, 0.3)],
    "promoter": [(21.5, 2.8), (22.4, 4.0), (21.7, 3.1), (22.1, 2.9), (27.4, 3.2), (24.0, 3.7), (21.2, 3.9), (20.4, 3.1)],
    "gisette": [(5.5, 0.9), (5.9, 0.7), (7.2, 1.2), (5.1, 1.3), (6.5, 0.8), (7.1, 1.3), (4.8, 0.9), (4.2, 0.8)],
    "madelon": [(30.8, 3.8), (15.3, 2.6), (16.8, 2.7), (17.4, 2.6), (15.1, 2.7), (15.9, 2.5), (16.7, 2.7), (16.6, 2.9)],
}

#: dataset -> method -> (mean error %, std %)
TABLE5: dict[str, dict[str, tuple[float, float]]] = {
    ds: dict(zip(METHODS, row)) for ds, row in _ROWS.items()
}

#: "vmi_naive" / "vmi_pairwise" -> baseline -> (wins, ties, losses) of the VMI method against it
WTL: dict[str, dict[str, tuple[int, int, int]]] = {
    "vmi_naive": {"mrmr": (11, 4, 2), "jmi": (10, 6, 1), "mim": (11, 6, 0), "cmim": (10, 7, 0),
                  "cife": (15, 0, 2), "spec_cmi": (13, 2, 2)},
    "vmi_pairwise": {"mrmr": (9, 6, 2), "jmi": (9, 6, 2), "mim": (15, 2, 0), "cmim": (13, 3, 1),
                     "cife": (15, 1, 1), "spec_cmi": (12, 3, 2)},
}
BASELINES = ["mrmr", "jmi", "mim", "cmim", "cife", "spec_cmi"]

#: synthetic tree model: I(x_i; y) in nats as printed (x1..x9); top three (bold): x1, x4, x5
SYNTHETIC_MI = [0.111, 0.052, 0.022, 0.058, 0.058, 0.025, 0.029, 0.012, 0.013]
#: the paper's Figure 1 (right): VMI_naive picks x1, x2, x3 first
SYNTHETIC_VMI_ORDER = ["x1", "x2", "x3"]
#: max-relevance (MIM) top three by the table
SYNTHETIC_MIM_TOP3 = ["x1", "x4", "x5"]
