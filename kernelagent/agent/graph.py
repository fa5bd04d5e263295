"""The LangGraph loop: prepare -> propose -> verify -> select -> (propose | finalize)."""

from __future__ import annotations

from typing import Any, Literal

from langgraph.graph import END, START, StateGraph

from kernelagent.agent.deps import RunContext
from kernelagent.agent.finalize import finalize
from kernelagent.agent.nodes import prepare, propose
from kernelagent.agent.select import select
from kernelagent.agent.state import AgentState
from kernelagent.agent.verify_node import verify


def after_select(state: AgentState) -> Literal["propose", "finalize"]:
    """Another turn unless `select` set a stop reason."""
    return "finalize" if state.get("stop") else "propose"


def build_graph(checkpointer: Any = None) -> Any:
    """The compiled graph; pass a checkpointer to make runs resumable (thread_id = run id)."""
    g = StateGraph(AgentState, context_schema=RunContext)
    g.add_node("prepare", prepare)
    g.add_node("propose", propose)
    g.add_node("verify", verify)
    g.add_node("select", select)
    g.add_node("finalize", finalize)
    g.add_edge(START, "prepare")
    g.add_edge("prepare", "propose")
    g.add_edge("propose", "verify")
    g.add_edge("verify", "select")
    g.add_conditional_edges("select", after_select, ["propose", "finalize"])
    g.add_edge("finalize", END)
    return g.compile(checkpointer=checkpointer)
