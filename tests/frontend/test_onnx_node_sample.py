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
    # function expansions that need the ops above (Range, Trilu, IsNaN, GatherElements...)
    "expanded": ("test_attention_4d_causal_expanded", "test_attention_3d_gqa_attn_mask_expanded",
                 "test_rms_normalization_3d_axis1_epsilon_expanded",
                 "test_nllloss_NCd1_mean_weight_negative_ii_expanded", "test_flexattention_causal_mask_expanded_ver26"),
    # axes, pads, shape, repeats... fed as graph inputs: the backend specializes on each run's values
    # ReduceMax of bool over an empty set is false (its start was printed as -INFINITY: true)
    "empty bool max": ("test_reduce_max_empty_set_bool",),
    "run-time inputs": ("test_blackmanwindow_expanded", "test_blackmanwindow_symmetric_expanded",
                        "test_center_crop_pad_crop_expanded", "test_center_crop_pad_pad_expanded",
                        "test_center_crop_pad_crop_and_pad_expanded", "test_center_crop_pad_crop_axes_hwc_expanded",
                        "test_center_crop_pad_crop_negative_axes_hwc_expanded",
                        "test_center_crop_pad_crop_axes_chw_expanded", "test_clip_example", "test_clip",
                        "test_clip_inbounds", "test_clip_outbounds", "test_clip_splitbounds",
                        "test_clip_min_greater_than_max", "test_clip_default_min", "test_clip_default_max",
                        "test_clip_default_int8_min", "test_clip_default_int8_max", "test_constantofshape_float_ones",
                        "test_constantofshape_int_zeros", "test_constantofshape_int_shape_zero", "test_cumsum_1d",
                        "test_cumsum_1d_exclusive", "test_cumsum_1d_reverse", "test_cumsum_1d_reverse_exclusive",
                        "test_cumsum_2d_axis_0", "test_cumsum_2d_axis_1", "test_cumsum_2d_negative_axis",
                        "test_cumsum_2d_int32", "test_cumsum_1d_int32_exclusive", "test_expand_dim_changed",
                        "test_expand_dim_unchanged", "test_hammingwindow_expanded",
                        "test_hammingwindow_symmetric_expanded", "test_hannwindow_expanded",
                        "test_hannwindow_symmetric_expanded", "test_constant_pad", "test_edge_pad",
                        "test_reflect_pad", "test_wrap_pad", "test_constant_pad_axes",
                        "test_constant_pad_negative_axes", "test_range_float_type_positive_delta",
                        "test_range_float16_type_positive_delta", "test_range_int32_type_negative_delta",
                        "test_reduce_log_sum_desc_axes", "test_reduce_log_sum_desc_axes_expanded",
                        "test_reduce_log_sum_asc_axes", "test_reduce_log_sum_asc_axes_expanded",
                        "test_reduce_log_sum_default", "test_reduce_log_sum_default_expanded",
                        "test_reduce_log_sum_negative_axes", "test_reduce_log_sum_negative_axes_expanded",
                        "test_reduce_log_sum_empty_set", "test_reduce_log_sum_empty_set_expanded",
                        "test_reduce_log_sum_exp_do_not_keepdims_example",
                        "test_reduce_log_sum_exp_do_not_keepdims_example_expanded",
                        "test_reduce_log_sum_exp_do_not_keepdims_random",
                        "test_reduce_log_sum_exp_do_not_keepdims_random_expanded",
                        "test_reduce_log_sum_exp_keepdims_example",
                        "test_reduce_log_sum_exp_keepdims_example_expanded",
                        "test_reduce_log_sum_exp_keepdims_random", "test_reduce_log_sum_exp_keepdims_random_expanded",
                        "test_reduce_log_sum_exp_default_axes_keepdims_example",
                        "test_reduce_log_sum_exp_default_axes_keepdims_example_expanded",
                        "test_reduce_log_sum_exp_default_axes_keepdims_random",
                        "test_reduce_log_sum_exp_default_axes_keepdims_random_expanded",
                        "test_reduce_log_sum_exp_negative_axes_keepdims_example",
                        "test_reduce_log_sum_exp_negative_axes_keepdims_example_expanded",
                        "test_reduce_log_sum_exp_negative_axes_keepdims_random",
                        "test_reduce_log_sum_exp_negative_axes_keepdims_random_expanded",
                        "test_reduce_log_sum_exp_empty_set", "test_reduce_log_sum_exp_empty_set_expanded",
                        "test_reduce_l1_do_not_keepdims_example", "test_reduce_l1_do_not_keepdims_example_expanded",
                        "test_reduce_l1_do_not_keepdims_random", "test_reduce_l1_do_not_keepdims_random_expanded",
                        "test_reduce_l1_keep_dims_example", "test_reduce_l1_keep_dims_example_expanded",
                        "test_reduce_l1_keep_dims_random", "test_reduce_l1_keep_dims_random_expanded",
                        "test_reduce_l1_default_axes_keepdims_example",
                        "test_reduce_l1_default_axes_keepdims_example_expanded",
                        "test_reduce_l1_default_axes_keepdims_random",
                        "test_reduce_l1_default_axes_keepdims_random_expanded",
                        "test_reduce_l1_negative_axes_keep_dims_example",
                        "test_reduce_l1_negative_axes_keep_dims_example_expanded",
                        "test_reduce_l1_negative_axes_keep_dims_random",
                        "test_reduce_l1_negative_axes_keep_dims_random_expanded", "test_reduce_l1_empty_set",
                        "test_reduce_l1_empty_set_expanded", "test_reduce_l2_do_not_keepdims_example",
                        "test_reduce_l2_do_not_keepdims_example_expanded", "test_reduce_l2_do_not_keepdims_random",
                        "test_reduce_l2_do_not_keepdims_random_expanded", "test_reduce_l2_keep_dims_example",
                        "test_reduce_l2_keep_dims_example_expanded", "test_reduce_l2_keep_dims_random",
                        "test_reduce_l2_keep_dims_random_expanded", "test_reduce_l2_default_axes_keepdims_example",
                        "test_reduce_l2_default_axes_keepdims_example_expanded",
                        "test_reduce_l2_default_axes_keepdims_random",
                        "test_reduce_l2_default_axes_keepdims_random_expanded",
                        "test_reduce_l2_negative_axes_keep_dims_example",
                        "test_reduce_l2_negative_axes_keep_dims_example_expanded",
                        "test_reduce_l2_negative_axes_keep_dims_random",
                        "test_reduce_l2_negative_axes_keep_dims_random_expanded", "test_reduce_l2_empty_set",
                        "test_reduce_l2_empty_set_expanded", "test_reduce_max_do_not_keepdims_example",
                        "test_reduce_max_do_not_keepdims_random", "test_reduce_max_keepdims_example",
                        "test_reduce_max_keepdims_random", "test_reduce_max_negative_axes_keepdims_example",
                        "test_reduce_max_negative_axes_keepdims_random", "test_reduce_max_bool_inputs",
                        "test_reduce_max_empty_set", "test_reduce_mean_do_not_keepdims_example",
                        "test_reduce_mean_do_not_keepdims_random", "test_reduce_mean_keepdims_example",
                        "test_reduce_mean_keepdims_random", "test_reduce_mean_default_axes_keepdims_example",
                        "test_reduce_mean_default_axes_keepdims_random",
                        "test_reduce_mean_negative_axes_keepdims_example",
                        "test_reduce_mean_negative_axes_keepdims_random", "test_reduce_min_do_not_keepdims_example",
                        "test_reduce_min_do_not_keepdims_random", "test_reduce_min_keepdims_example",
                        "test_reduce_min_keepdims_random", "test_reduce_min_negative_axes_keepdims_example",
                        "test_reduce_min_negative_axes_keepdims_random", "test_reduce_min_bool_inputs",
                        "test_reduce_min_empty_set", "test_reduce_prod_do_not_keepdims_example",
                        "test_reduce_prod_do_not_keepdims_random", "test_reduce_prod_keepdims_example",
                        "test_reduce_prod_keepdims_random", "test_reduce_prod_negative_axes_keepdims_example",
                        "test_reduce_prod_negative_axes_keepdims_random", "test_reduce_prod_empty_set",
                        "test_reduce_sum_do_not_keepdims_example", "test_reduce_sum_do_not_keepdims_random",
                        "test_reduce_sum_keepdims_example", "test_reduce_sum_keepdims_random",
                        "test_reduce_sum_default_axes_keepdims_example",
                        "test_reduce_sum_default_axes_keepdims_random",
                        "test_reduce_sum_negative_axes_keepdims_example",
                        "test_reduce_sum_negative_axes_keepdims_random",
                        "test_reduce_sum_empty_axes_input_noop_example", "test_reduce_sum_empty_axes_input_noop",
                        "test_reduce_sum_empty_set", "test_reduce_sum_empty_set_non_reduced_axis_zero",
                        "test_reduce_sum_square_do_not_keepdims_example",
                        "test_reduce_sum_square_do_not_keepdims_example_expanded",
                        "test_reduce_sum_square_do_not_keepdims_random",
                        "test_reduce_sum_square_do_not_keepdims_random_expanded",
                        "test_reduce_sum_square_keepdims_example", "test_reduce_sum_square_keepdims_example_expanded",
                        "test_reduce_sum_square_keepdims_random", "test_reduce_sum_square_keepdims_random_expanded",
                        "test_reduce_sum_square_default_axes_keepdims_example",
                        "test_reduce_sum_square_default_axes_keepdims_example_expanded",
                        "test_reduce_sum_square_default_axes_keepdims_random",
                        "test_reduce_sum_square_default_axes_keepdims_random_expanded",
                        "test_reduce_sum_square_negative_axes_keepdims_example",
                        "test_reduce_sum_square_negative_axes_keepdims_example_expanded",
                        "test_reduce_sum_square_negative_axes_keepdims_random",
                        "test_reduce_sum_square_negative_axes_keepdims_random_expanded",
                        "test_reduce_sum_square_empty_set", "test_reduce_sum_square_empty_set_expanded",
                        "test_reshape_reordered_all_dims", "test_reshape_reordered_last_dims",
                        "test_reshape_reduced_dims", "test_reshape_extended_dims", "test_reshape_one_dim",
                        "test_reshape_negative_dim", "test_reshape_negative_extended_dims", "test_reshape_zero_dim",
                        "test_reshape_zero_and_negative_dim", "test_reshape_allowzero_reordered", "test_slice",
                        "test_slice_neg", "test_slice_start_out_of_bounds", "test_slice_end_out_of_bounds",
                        "test_slice_default_axes", "test_slice_default_steps", "test_slice_neg_steps",
                        "test_slice_negative_axes", "test_split_variable_parts_1d_opset13",
                        "test_split_variable_parts_2d_opset13", "test_split_variable_parts_default_axis_opset13",
                        "test_split_zero_size_splits_opset13", "test_split_variable_parts_1d_opset18",
                        "test_split_variable_parts_2d_opset18", "test_split_variable_parts_default_axis_opset18",
                        "test_split_zero_size_splits_opset18", "test_squeeze", "test_squeeze_negative_axes",
                        "test_tile", "test_tile_precomputed", "test_unsqueeze_axis_0", "test_unsqueeze_axis_1",
                        "test_unsqueeze_axis_2", "test_unsqueeze_two_axes", "test_unsqueeze_three_axes",
                        "test_unsqueeze_unsorted_axes", "test_unsqueeze_negative_axes"),
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
