"""`pocketbert ladder`: from one teacher, a ladder of students built, exported and benched by the stages' own
commands, then one table and Pareto plot read from the files those commands wrote."""
