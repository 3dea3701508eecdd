"""A fixed sample of ONNX's node conformance cases (``onnx.backend.test``), run in CI.

The full node suite takes too long for CI; this sample covers every op form the importer
gained a converter for, and function expansions (Attention, RMSNormalization, NLLLoss)
built from them, each case compiled to C (a fallback to the reference interpreter fails
the case). Listed cases must pass; the full suite is run with a ``-k`` filter.
"""

from __future__ import annotations

import onnx.backend.test
import pytest

import fusionlang.onnx_backend

#: node cases (without the device suffix), by op
SAMPLE: dict[str, tuple[str, ...]] = {
    "IsNaN": ("test_isnan",),
    "IsInf": ("test_isinf", "test_isinf_negative", "test_isinf_positive"),
    "GatherElements": ("test_gather_elements_0", "test_gather_elements_1", "test_gather_elements_negative_indices"),
    "GatherND": ("test_gathernd_example_float32", "test_gathernd_example_int32",
                 "test_gathernd_example_int32_batch_dim1"),
    "Mod": ("test_mod_broadcast", "test_mod_int64_fmod", "test_mod_mixed_sign_float32",
            "test_mod_mixed_sign_int32", "test_mod_mixed_sign_int8", "test_mod_uint8",
            "test_mod_float32_mixed_sign_fmod_0", "test_mod_float_edge_cases_fmod_0_float64"),
    "Trilu": ("test_tril", "test_tril_neg", "test_tril_out_pos", "test_tril_zero", "test_triu_one_row",
              "test_triu_out_neg_out", "test_triu_square_neg"),
    "ArgMax": ("test_argmax_default_axis_example", "test_argmax_keepdims_random_select_last_index",
               "test_argmax_negative_axis_keepdims_example", "test_argmax_no_keepdims_random"),
    "ArgMin": ("test_argmin_default_axis_random_select_last_index", "test_argmin_no_keepdims_example",
               "test_argmin_negative_axis_keepdims_random_select_last_index"),
    "Shrink": ("test_shrink_hard", "test_shrink_soft"),
    "Mish": ("test_mish",),
    "HardSwish": ("test_hardswish",),
    "NegativeLogLikelihoodLoss": ("test_nllloss_NC", "test_nllloss_NCd1_mean_weight_negative_ii",
                                  "test_nllloss_NCd1d2_reduction_sum", "test_nllloss_NCd1d2_with_weight_reduction_sum_ii",
                                  "test_nllloss_NCd1d2d3_none_no_weight_negative_ii",
                                  "test_nllloss_NCd1d2d3d4d5_mean_weight"),
    "BitShift": ("test_bitshift_left_uint8", "test_bitshift_right_int8_negative_input",
                 "test_bitshift_left_int32_overflow", "test_bitshift_right_int8_shift_ge_width",
                 "test_bitshift_left_int8_negative_shift", "test_bitshift_right_int64"),
    "SoftmaxCrossEntropyLoss": ("test_sce_mean", "test_sce_none_weights_log_prob", "test_sce_sum",
                                "test_sce_mean_no_weight_ii_4d_log_prob", "test_sce_NCd1_mean_weight_negative_ii",
                                "test_sce_NCd1d2d3_sum_weight_high_ii_log_prob", "test_sce_mean_weight_ii_3d"),
    # function expansions that need the ops above (Range, Trilu, IsNaN, GatherElements...)
    "expanded": ("test_attention_4d_causal_expanded", "test_attention_3d_gqa_attn_mask_expanded",
                 "test_rms_normalization_3d_axis1_epsilon_expanded",
                 "test_nllloss_NCd1_mean_weight_negative_ii_expanded", "test_flexattention_causal_mask_expanded_ver26"),
}
CASES = {name for names in SAMPLE.values() for name in names}

_backend_test = onnx.backend.test.BackendTest(fusionlang.onnx_backend, __name__)
_backend_test.include(r"_cpu$")
OnnxBackendNodeModelTest = _backend_test.test_cases["OnnxBackendNodeModelTest"]
ALL_NODE_CASES = {a[: -len("_cpu")] for a in vars(OnnxBackendNodeModelTest) if a.endswith("_cpu")}
for _attr in [a for a in vars(OnnxBackendNodeModelTest) if a.startswith("test_")]:
    if _attr[: -len("_cpu")] not in CASES or not _attr.endswith("_cpu"):
        delattr(OnnxBackendNodeModelTest, _attr)
del _attr

# a case that runs on the reference interpreter has not compiled: that is a failure here
pytestmark = pytest.mark.filterwarnings("error:fusionlang. running .* on the reference interpreter:UserWarning")


def test_sample_names_real_cases():
    assert CASES <= ALL_NODE_CASES, sorted(CASES - ALL_NODE_CASES)
