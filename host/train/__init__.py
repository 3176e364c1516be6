"""Small real training jobs over the collectives: data, models, the data-parallel loop.

``cluster`` (in-process hosts over the emulated fabric; no torch), ``job`` (the job
description: JSON in, validated), ``data`` (scikit-learn's digits, text shipped with
Python), ``models`` (MLP, CNN, a character-level transformer), ``tasks`` (the task table),
``loop`` (one worker's data-parallel training, the server's loop), ``roles`` (what the server,
a worker and a ring rank connect and run), ``run`` (a whole job in one process, and its
result tables), ``records`` (records as JSON lines). The per-host process of a fabric job is
:mod:`host.train_agent`. Importing this package imports no torch; the modules that need it do.
"""
