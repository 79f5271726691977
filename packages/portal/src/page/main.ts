// The page's entry: Preact renders the portal into #app.
import { h, render } from "preact";
import { App } from "./app.tsx";
import "./portal.css";

render(h(App, {}), document.getElementById("app")!);
