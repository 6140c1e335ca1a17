"""The worker pool of a parallel build: units, the scheduler, forked workers and make's
jobserver."""
