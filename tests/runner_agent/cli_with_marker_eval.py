"""The real ``d2kgrade`` CLI, with the marker evaluator standing in for ``runner.evaluate`` (kill -9 test)."""

import runner.agent.evaluation as evaluation
from tests.runner_agent.helpers import marker_evaluate

evaluation.default_evaluate_fn = lambda: marker_evaluate

if __name__ == "__main__":
    from d2kgrade.cli import main

    main()
