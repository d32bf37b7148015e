from tracker.search import item_search


def test_smoke(project, make_item, indexed):
    with indexed():
        item = make_item(title="Password reset email never arrives", description="Users wait for the mail.")
        make_item(title="Dark mode", description="Theme switch.")
    hits = item_search(project=project, query="password email")
    assert hits[0].key == item.key, hits

    hits = item_search(project=project, query=item.key)
    assert hits[0].key == item.key
