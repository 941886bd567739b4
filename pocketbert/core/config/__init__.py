"""The recipe and the command line: the typed, validated recipe (recipe), command-line options made from its fields
(recipe_options), the options every command shares (cli_options), and the export variants' names and the int8 budgets a
recipe may name (export_variant_names, int8_budgets). It may import the wings below it (run/, tasks/, process/) and
core's ground."""
