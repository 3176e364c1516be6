"""Small real training jobs over the collectives: data, models, the data-parallel loop.

``cluster`` (in-process hosts over the emulated fabric; no torch), ``job`` (the job
description: JSON in, validated), ``data`` (scikit-learn's digits, text shipped with
Python), ``models`` (MLP, CNN, a character-level transformer), ``loop`` (one worker's
data-parallel training), ``run`` (a whole job: server and workers, in process or per host).
Importing this package imports no torch; the modules that need it do.
"""
