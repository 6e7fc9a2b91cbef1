"""What we hand out: the student repository, the nbgrader course, Classroom 50, and the Gradescope
zip and its runner."""
