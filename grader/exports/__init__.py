"""What grades become: gradebook, summary, report, LMS and Gradescope files, one builder per
format."""
