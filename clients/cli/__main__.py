from clients.cli import main
from clients.process_exit import exit_after_clean_shutdown

# Not sys.exit: the interpreter's teardown adds time to every command (clients.process_exit).
exit_after_clean_shutdown(main())
