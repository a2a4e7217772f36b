from allocmark.cli import main

main()
