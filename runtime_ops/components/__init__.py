"""The project's Dagster component types (`dg list components`) and how the pipelines' declarations load."""

from runtime_ops.approvals.asset_gate import require_approval
from runtime_ops.components.approval_gate import ApprovalGate, approval_gate
from runtime_ops.components.inference_pipeline import InferencePipeline
from runtime_ops.components.retrieval_pipeline import RetrievalPipeline

__all__ = ["ApprovalGate", "InferencePipeline", "RetrievalPipeline", "approval_gate", "require_approval"]
