"""One module per lab: ``labNN.py`` holds ``PARAMS`` (small papermill parameters) and
``check(values)``, assertions on the values the lab publishes, derived independently of the
lab's own code. tests/test_labs.py fails for a lab without one.
"""
