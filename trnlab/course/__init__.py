"""The course as a product: syllabus, learner and instructor editions, per-student variants,
grading, and an environment check for learners.

Submodules (imported on use, so ``import trnlab.course`` stays cheap):

- :mod:`trnlab.course.syllabus`: the labs, their times, prerequisites and outcomes;
- :mod:`trnlab.course.editions`: the instructor edition generated from the learner edition;
- :mod:`trnlab.course.variants`: per-student variants of exercises, from a seed;
- :mod:`trnlab.course.grading`: run a folder of submitted notebooks, write a CSV of checks;
- :mod:`trnlab.course.doctor`: what a learner's environment is missing, and how to fix it.

Command line: ``python -m trnlab.course --help``.
"""
