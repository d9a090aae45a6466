"""The training stages, in the order ``train()`` runs them. Each is ``run(ctx)``: it does the
steps its state says are left, committing each (``Run.commit_step``), and marks itself finished.
Each step, evaluation, collection and the baselines run as a unit (``Run.unit``), before which
an invocation's deadline may stop the run.
"""
