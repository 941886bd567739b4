"""The process: which process of a run this is (launch_env), a step that ends with the command that started it
(parent_watch), what the exit status means (exit_codes), silence for the converters (quiet), and the faults a test asks
for by name (faults). It imports core's ground only."""
