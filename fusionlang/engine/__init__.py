"""What gets rewritten and grouped: the rewrite engine, the partitioners (apollo, tvm,
dp), the cost model, and the FusionPlan they produce, with the merge decisions that
shaped it."""

from fusionlang.engine.cost import DEVICES, CostModel, GroupCost
from fusionlang.engine.decisions import MergeDecision
from fusionlang.engine.partition import STRATEGIES, partition
from fusionlang.engine.pipeline import fuse, unfused_stats
from fusionlang.engine.plan import FusionPlan, Group, PlanStats, make_group, per_node_plan, single_group_plan

__all__ = [
    "DEVICES",
    "STRATEGIES",
    "CostModel",
    "FusionPlan",
    "Group",
    "GroupCost",
    "MergeDecision",
    "PlanStats",
    "fuse",
    "make_group",
    "partition",
    "per_node_plan",
    "single_group_plan",
    "unfused_stats",
]
