"""LDAP's string forms as a directory reads them (clusterforge.plan.security.ldap_syntax): the
inventory check refuses a DN or a filter the directory would refuse at the first login."""

from __future__ import annotations

import pytest

from clusterforge.plan.security.ldap_syntax import dn_problem, filter_problem

GOOD_DNS = [
    "ou=people,dc=example,dc=internal",
    "cn=Smith\\, John,ou=people,dc=example,dc=internal",
    "cn=a\\2Cb,dc=x",
    "2.5.4.3=x+sn=y,dc=z",
    "cn=#0403616263,dc=x",
    "uid=alice, ou=people, dc=example",
]
BAD_DNS = ["not a dn", "cn=a,b", "cn=", "=x", "cn=a\\", "cn=a+b", "cn=a=b", "9cn=x", "cn=#zz"]


@pytest.mark.parametrize("value", GOOD_DNS)
def test_a_dn_passes(value: str) -> None:
    assert dn_problem("opensearch_ldap_userbase", value) is None


@pytest.mark.parametrize("value", BAD_DNS)
def test_a_broken_dn_is_named(value: str) -> None:
    problem = dn_problem("opensearch_ldap_userbase", value)
    assert problem is not None
    assert problem.startswith("opensearch_ldap_userbase")
    assert "e.g. ou=people" in problem


GOOD_FILTERS = [
    "(uid={0})",
    "(&(objectClass=person)(uid={0}))",
    "(|(member={0})(uniqueMember={0}))",
    "(!(cn=x))",
    "(cn:dn:=x)",
    "(cn=a\\2a)",
    "(age>=5)",
    "(cn=*)",
]
BAD_FILTERS = [
    "uid={0}",
    "(uid={0}",
    "(uid={0}))",
    "(a=b)(c=d)",
    "(!(a=b)(c=d))",
    "(&)",
    "(a=b(c)",
    "(=x)",
    "(cn)",
    "(cn=\\zz)",
    " (cn=x)",
]


@pytest.mark.parametrize("value", GOOD_FILTERS)
def test_a_filter_passes(value: str) -> None:
    assert filter_problem("opensearch_ldap_usersearch", value) is None


@pytest.mark.parametrize("value", BAD_FILTERS)
def test_a_broken_filter_is_named(value: str) -> None:
    problem = filter_problem("opensearch_ldap_usersearch", value)
    assert problem is not None
    assert problem.startswith("opensearch_ldap_usersearch")
