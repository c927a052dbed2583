"""``python -m rllm.cli`` runs ``rllm-cli``."""

from rllm.cli.main import main

main()
