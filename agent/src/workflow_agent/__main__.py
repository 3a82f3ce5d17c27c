from workflow_agent.cli import main

raise SystemExit(main())
