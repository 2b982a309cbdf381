"""Analyses: facts about a module that passes read and do not change.

`manager.py` (`AnalysisManager`: computed on demand, kept until a pass does not preserve them),
`memory.py` (which shared memory an op touches, through which proxy, which bytes a value names),
`access_index.py` (those accesses in absolute bytes, after allocation), `flights.py` (cp.async
groups in flight), `dataflow.py` (the dataflow walks' branch joins and loop fixpoints),
`axis_info.py` (divisibility / contiguity of integer tensors), `layout_math.py` (distributed and
shared layouts as linear maps).
"""
