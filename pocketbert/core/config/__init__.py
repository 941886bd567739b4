"""The recipe and the command line: the typed, validated recipe (recipe), command-line options made from its fields
(recipe_options), the options every command shares (cli_options), the export's families of programs (their names,
defaults and choice rules: export_families) and the int8 budgets a recipe may name (int8_budgets). It may import the
wings below it (run/, tasks/, process/) and core's ground."""
