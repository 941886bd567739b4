"""The run folder: every file name in it (run_files), folders that appear whole or not at all (atomic_folder),
manifest.json (manifest), paths a user gives and a run records (user_paths), one writer per folder (run_lock), what a
failed write means (storage), and where pocketbert keeps what it can rebuild (cache_dir). It may import the wings below
it (tasks/, process/) and core's ground."""
