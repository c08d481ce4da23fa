"""The sidebar's ways of loading data (its "Dataset" radio), named once for the sidebar and for a
reopened study's restore (`ui.sidebar.apply_restore`), so neither imports the other for them."""

SAMPLE, UPLOAD, IMPORT = "Shipped sample", "Upload files", "Import a source"
SESSION_FILES = (
    "_study_session_files"  # role -> the uploaded (or restored) file the data came from (ui.sidebar)
)
