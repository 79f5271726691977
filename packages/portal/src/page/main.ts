// The page's entry: Preact renders the portal into #app, in place of the "Loading…" the HTML shows.
import { h, render } from "preact";
import { App } from "./app.tsx";
import "./portal.css";

const container = document.getElementById("app")!;
container.replaceChildren();
render(h(App, {}), container);
