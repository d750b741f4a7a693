"""One supervised session from start to saved state: its start (start.py, opening.py,
options.py), the runs of the agent it restarts (run.py), what serves it meanwhile
(services.py), and how it ends (ending.py)."""
