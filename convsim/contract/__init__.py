"""The graph-file contract: loading and checking a graph file (graphfile), the session context handed
to nodes (context, default_context), seeded random streams (seeding) and LangGraph Platform
interop (interop).
"""
