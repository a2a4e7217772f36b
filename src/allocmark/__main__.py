from allocmark.entry import main

main()
