"""The shipped scenarios, one graph file each (the graph-file contract: docs/ENGINE_API.md).

``convsim run <name>`` finds a graph by its file name here or in ``./graphs`` of the current
directory; any other graph file is named by its path.
"""
