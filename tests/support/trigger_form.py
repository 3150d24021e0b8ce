"""Airflow 3's trigger form driven as a person drives it: headless Chromium (Debian `chromium` and `chromium-driver`,
no browser download), log in, open a DAG's form, fill its sections, trigger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from selenium import webdriver
from selenium.common.exceptions import ElementClickInterceptedException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


@contextmanager
def chromium(failure: Path) -> Iterator[webdriver.Chrome]:
    """A headless browser; if the block fails, what the page looked like is kept in `failure` (.png and .html)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,2000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    driver.implicitly_wait(10)
    try:
        yield driver
    except BaseException:
        driver.save_screenshot(failure.with_suffix(".png"))
        failure.with_suffix(".html").write_text(driver.page_source)
        raise
    finally:
        driver.quit()


class TriggerForm:
    def __init__(self, driver: webdriver.Chrome, url: str) -> None:
        self.driver, self.url = driver, url

    def login(self, user: str, password: str) -> None:
        self.driver.get(f"{self.url}/")
        self.driver.find_element(By.NAME, "username").send_keys(user)
        self.driver.find_element(By.NAME, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(self.driver, 30).until(lambda d: "/auth/login" not in d.current_url)

    def open(self, dag_id: str, first_section: str) -> None:
        self.driver.get(f"{self.url}/dags/{dag_id}")
        self.driver.find_element(By.CSS_SELECTOR, "button[aria-label='Trigger Dag']").click()
        opened = f"[role=dialog] button[id$=':trigger:{first_section}']"
        WebDriverWait(self.driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, opened))

    @property
    def dialog(self) -> WebElement:
        return self.driver.find_elements(By.CSS_SELECTOR, "[role=dialog]")[-1]

    def section(self, name: str) -> None:
        """Expand a section (one at a time: a closed section's fields are not in the page)."""
        trigger = self.dialog.find_element(By.CSS_SELECTOR, f"button[id$=':trigger:{name}']")
        if trigger.get_attribute("aria-expanded") != "true":
            trigger.click()
            WebDriverWait(self.driver, 10).until(lambda _: trigger.get_attribute("aria-expanded") == "true")

    def fill(self, field: str, value: Any) -> None:
        """Type into a text, number or multi-line field; pick from a dropdown; paste JSON into an object field."""
        if isinstance(value, dict):
            label = f".//label[normalize-space(text())='{field}']/ancestor::div[@data-part='root'][1]"
            field_root = self.dialog.find_element(By.XPATH, label)
            self._click(field_root.find_element(By.CSS_SELECTOR, ".monaco-editor .view-lines"))
            editor = self.driver.switch_to.active_element
            editor.send_keys(Keys.CONTROL, "a", Keys.DELETE)
            self._paste(json.dumps(value))
            return
        self.driver.implicitly_wait(0)  # the section is open: the field is there, as a dropdown or not
        try:
            dropdown = self.dialog.find_elements(By.CSS_SELECTOR, f"div#element_{field} input[role=combobox]")
        finally:
            self.driver.implicitly_wait(10)
        if dropdown:
            self._click(dropdown[0])
            dropdown[0].send_keys(str(value), Keys.ENTER)
        else:
            element = self.dialog.find_element(By.NAME, f"element_{field}")
            self._click(element)
            element.send_keys(Keys.CONTROL, "a", Keys.DELETE)
            self._paste(str(value))

    def _click(self, element: WebElement) -> None:
        """Scroll the dialog to the field first, as a person would (else the dialog's footer takes the click), and
        click once the field is where it is drawn (while a section opens, its fields move under the pointer)."""
        self.driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)

        def clicked(_: webdriver.Chrome) -> bool:
            element.click()
            return True

        WebDriverWait(self.driver, 10, poll_frequency=0.2, ignored_exceptions=[ElementClickInterceptedException]).until(
            clicked
        )

    def _paste(self, text: str) -> None:
        """Paste into the focused field, as a person pastes a query: typed key by key, the form re-renders while
        typing (characters of a long SQL get lost) and the JSON editor re-formats as soon as the text parses."""
        self.driver.execute_cdp_cmd("Input.insertText", {"text": text})

    def trigger(self) -> str:
        """Press Trigger; the new run's id (the UI goes to its page)."""
        [button] = [b for b in self.dialog.find_elements(By.CSS_SELECTOR, "button") if b.text.strip() == "Trigger"]
        button.click()
        WebDriverWait(self.driver, 30).until(lambda d: "/runs/" in d.current_url)
        return unquote(self.driver.current_url.rsplit("/runs/", 1)[1].split("/")[0])


def plugin_frame(driver: webdriver.Chrome, url: str, route: str, inside: str) -> None:
    """Open a plugin's page in Airflow's UI (`/plugin/<route>`) and switch into the frame the UI shows it in, once
    the frame shows `inside` (a CSS selector)."""
    driver.get(f"{url}/plugin/{route}")
    WebDriverWait(driver, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "iframe"))
    driver.switch_to.frame(driver.find_element(By.CSS_SELECTOR, "iframe"))
    WebDriverWait(driver, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, inside))
